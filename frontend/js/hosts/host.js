// hosts/: what a panel is mounted by. A panel (panels/*.js) is a view that builds its own DOM inside the
// element it is given and keeps its state in its closure; everything outside — data, persistence, the
// theme, links to other views — it asks of its host:
//
//   mount(root, host, state) -> {update(state), dispose()}
//
// The page host (hosts/page.js) answers over HTTP and keeps the state in the address bar; the notebook
// widget's host (widget/host.js) answers in the kernel over anywidget traits. A service a host does not
// offer is absent (null), and the panel leaves out what needs it: a widget has no device pickers, no
// share links to other views, no Plotly.
//
// This module is the contract, as types, and the one helper both hosts share.

/**
 * @typedef {object} Data what a host answers (each null when it cannot); every method may throw an
 *   ApiError ({code, message, hint?, ...}) that the panel shows where it belongs
 * @property {null | (() => Promise<any>)} platforms the pickers' catalog (GET /api/platforms)
 * @property {null | ((req: any, signal?: AbortSignal) => Promise<any>)} layout an /api/layout answer for a
 *   request (the widget's kernel relays out its own array: only spec, shape and dtype can change there)
 * @property {null | ((body: any) => Promise<any>)} reshard POST /api/reshard
 * @property {null | ((devices: string, slices: number, signal?: AbortSignal) => Promise<any>)} topology
 * @property {null | ((req: any, signal?: AbortSignal) => Promise<any>)} topologyMesh POST /api/topology/mesh
 * @property {null | ((body: any, signal?: AbortSignal) => Promise<any>)} topologyGroups POST /api/topology/groups
 * @property {null | (() => Promise<{kernels: any[], dtypes: string[]}>)} kernels the kernel catalog
 * @property {null | ((req: any, progress: (text: string, state: string) => void, current: () => boolean) => Promise<any>)} runKernel
 *   a kernel run's result (progress hears "queued (2 ahead) 0.4 s", its state name; current() false: give up)
 * @property {null | ((ref: any) => Promise<any>)} snapshot a stored snapshot, a merged run or one process of it
 * @property {null | ((ref: any, rules: any) => Promise<any>)} whatif POST /api/snapshots/whatif
 * @property {null | ((a: any, b: any) => Promise<any>)} diff POST /api/snapshots/diff
 * @property {null | ((id: string) => Promise<{view: string, state: any}>)} link a stored share link
 * @property {null | ((a: any, b: any) => Promise<any>)} compare POST /api/compare
 * @property {null | (() => Promise<Examples>)} examples the tutorials' own cells (frontend/examples.json)
 */

/**
 * @typedef {{layout: {label: string, source: string, state: Record<string, string | number>}[],
 *   kernels: {label: string, source: string, query: string}[]}} Examples
 */

/**
 * @typedef {object} Recent the snapshots this browser opened (the server lists none)
 * @property {() => {href: string, name: string, what: string, at: number}[]} list
 * @property {(entry: {href: string, name: string, what: string}) => void} remember
 * @property {() => void} forget
 */

/**
 * @typedef {object} Host
 * @property {"page" | "widget"} kind
 * @property {Data} data
 * @property {() => boolean} dark whether pictures are drawn in the dark scheme
 * @property {(fn: () => void) => () => void} onTheme calls fn when the scheme changes; returns the unsubscribe
 * @property {(name: string) => void} bump counts an event (tests and benchmarks wait on the counts)
 * @property {(name: string) => void} mark records when an event first happened (ms since the page
 *   loaded: what benchmarks read)
 * @property {(state: any, replace: boolean) => void} save keeps the panel's state (the page: in its address,
 *   `replace` while typing; the widget: nothing to keep)
 * @property {null | ((state: any) => Promise<string>)} share makes a share link of the panel at `state`
 *   (the page: POST /api/links; the widget: publishes to its dashboard)
 * @property {string} shareLabel the share button's text
 * @property {null | ((view: string, query: string) => string)} href another view's address at a query
 * @property {null | ((view: string, query: string) => void)} go opens another view (the page navigates)
 * @property {null | ((container: HTMLElement, data: any) => Promise<void>)} memoryChart draws bytes per device
 * @property {null | Recent} recent
 * @property {(element: HTMLElement) => number | undefined} fitHeight how tall a panel's main picture, drawn in
 *   `element`, may be (px; undefined: no limit): on a page, what is left of the first screen under it
 * @property {number} foldMeshAbove mesh tables of more devices are folded, built when opened (0: never)
 * @property {Set<string>} fixed state fields the host cannot change (shown read-only): the widget's
 *   array lives on its own devices and mesh
 */

/**
 * Counts one more `name` event on `element`'s data-name attribute.
 * @param {HTMLElement} element
 * @param {string} name
 */
export function countOn(element, name) {
  const data = element.dataset;
  data[name] = String(Number(data[name] || 0) + 1);
}

/**
 * Records on `element`'s data-name attribute when `name` first happened (ms since the page loaded).
 * @param {HTMLElement} element
 * @param {string} name
 */
export function markOn(element, name) {
  if (!element.dataset[name]) element.dataset[name] = String(Math.round(performance.now()));
}
