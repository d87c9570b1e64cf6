// The page URL is the view's whole state: pages read it only from their own query string (a share
// link /s/<id> is redirected by the server to the view's page with that query), write it back on
// every change, and hear the back and forward buttons.

/** The current page's query. @returns {URLSearchParams} */
export function pageQuery() {
  return new URLSearchParams(location.search);
}

/**
 * Puts `path?query` in the address bar: a new history entry, or (`replace`, e.g. while typing) the
 * same one. Nothing happens when it is there already.
 * @param {string} path e.g. "/topology.html"
 * @param {string} query without the "?"
 * @param {boolean} replace
 */
export function writeUrl(path, query, replace) {
  const url = query ? `${path}?${query}` : path;
  if (location.pathname + location.search === url) return;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
}

/** Calls `fn` with the restored query after back or forward. @param {(q: URLSearchParams) => void} fn */
export function onBackForward(fn) {
  window.addEventListener("popstate", () => fn(pageQuery()));
}
