// "Copy link": stores the view's state as a share link (POST /api/links), shows the short /s/<id>
// link in a box and tries the clipboard (it may be refused; the box is there either way). Opening
// the link, the server redirects to the view's page with the state in its query.

import { postJSON } from "./api.js";
import { el } from "./dom.js";

/**
 * Adds the Copy link button and the box for the link to `container`.
 * @param {HTMLElement} container
 * @param {{view: string, state: () => Record<string, unknown>, onStatus: (text: string) => void,
 *   onError: (e: unknown) => void}} opts `view` and `state()` are stored; `onStatus` hears "link
 *   copied" or where to copy it from
 */
export function shareControl(container, opts) {
  const button = el("button", "", "Copy link");
  button.type = "button";
  const out = el("input", "share-url");
  out.type = "text";
  out.readOnly = true;
  out.hidden = true;
  out.setAttribute("aria-label", "Share link");
  button.addEventListener("click", async () => {
    try {
      const res = await postJSON("/api/links", { view: opts.view, state: opts.state() });
      out.value = `${location.origin}${res.url}`;
      out.hidden = false;
      out.select();
      try {
        await navigator.clipboard.writeText(out.value);
        opts.onStatus("link copied");
      } catch {
        opts.onStatus("link ready: copy it from the box");
      }
    } catch (e) {
      opts.onError(e);
    }
  });
  container.append(button, out);
}
