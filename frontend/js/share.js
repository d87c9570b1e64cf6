// "Copy link", shared by every view: store the view's state, show the short /s/<id> link in the
// page's #share-url box, and try the clipboard (it may be refused; the box is there either way).

import { postJSON } from "./api.js";

/**
 * @param {string} view the view name stored with the link (layout, topology, kernels, snapshots)
 * @param {Record<string, unknown>} state what reopens the view
 * @returns {Promise<string>} what to tell the user: "link copied" or where to copy it from
 */
export async function shareLink(view, state) {
  const res = await postJSON("/api/links", { view, state });
  const out = /** @type {HTMLInputElement} */ (document.getElementById("share-url"));
  out.value = `${location.origin}${res.url}`;
  out.hidden = false;
  out.select();
  try {
    await navigator.clipboard.writeText(out.value);
    return "link copied";
  } catch {
    return "link ready: copy it from the box";
  }
}
