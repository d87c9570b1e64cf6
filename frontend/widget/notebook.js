// The notebook widget's front end (anywidget): the dashboard's own panels — the layout explorer's for an
// array or a layout, the snapshot view's for a pytree or an inspect_jit capture — mounted in an output
// cell by the widget's host (widget/host.js), which answers them in the kernel over synced traits
// (shardscope/notebook/widget.py). Bundled with every module it imports into one ES module by
// shardscope/notebook/bundle.py: no server, no network, nothing fetched.

import { el } from "../js/lib/dom.js";
import { mount as mountLayout } from "../js/panels/layout.js";
import { mount as mountSnapshot } from "../js/panels/snapshot.js";
import { decode, widgetHost } from "./host.js";

/** @param {{model: import("./host.js").Model, el: HTMLElement}} ctx */
function render({ model, el: cell }) {
  const root = el("div", "shardscope-nb");
  root.dataset.cardHome = ""; // in a shadow root (marimo), the hover card lives here, under the widget's styles
  cell.replaceChildren(root);
  const data = decode(model.get("payload"));
  root.dataset.kind = data.kind;
  const { host, state, dispose } = widgetHost(model, root, cell, data);
  const panel = el("div", "ss-panel");
  // a layout is titled with what was shown; a snapshot's panel says its own name
  if (data.kind !== "snapshot") root.append(el("div", "ss-title", data.name));
  root.append(panel);
  const mounted = (data.kind === "snapshot" ? mountSnapshot : mountLayout)(panel, host, state);
  return () => {
    mounted.dispose();
    dispose();
  };
}

export default { render };
