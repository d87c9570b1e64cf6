// The share button: asks the panel's host for a link to what is on screen (the page stores the state
// as a share link, POST /api/links; the notebook widget publishes to its dashboard), shows the link in
// a box with a link to open it, and tries the clipboard (it may be refused; the box is there either way).

import { el } from "./dom.js";

/**
 * Adds the button, the box for the link and the link that opens it to `container`.
 * @param {HTMLElement} container
 * @param {{label: string, make: () => Promise<string>, onStatus: (text: string) => void,
 *   onError: (e: unknown) => void}} opts label: the button's text; make: the link (a full URL);
 *   onStatus hears "link copied", where to copy it from, or that it is being made
 */
export function shareControl(container, opts) {
  const button = el("button", "", opts.label);
  button.type = "button";
  const out = el("input", "share-url");
  out.type = "text";
  out.readOnly = true;
  out.hidden = true;
  out.setAttribute("aria-label", "Share link");
  const open = el("a", "share-open", "open");
  open.target = "_blank";
  open.rel = "noopener noreferrer";
  open.hidden = true;
  button.addEventListener("click", async () => {
    opts.onStatus("making the link…");
    try {
      const url = await opts.make();
      out.value = url;
      open.href = url;
      out.hidden = open.hidden = false;
      out.select();
      try {
        await navigator.clipboard.writeText(url);
        opts.onStatus("link copied");
      } catch {
        opts.onStatus("link ready: copy it from the box");
      }
    } catch (e) {
      opts.onStatus("");
      opts.onError(e);
    }
  });
  container.append(button, out, open);
}
