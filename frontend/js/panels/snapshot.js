// The snapshot panel: what a user's program captured (sharding_core.capture / publish, shardscope.show).
// A plan or an inspect_jit capture leads with what matters: the plan's verdict, HBM per device by kind of
// leaf against the chip's capacity, the step time and the roofline (components/plan.js) — or XLA's refusal
// for memory with its figures — and then its collectives (op, mesh axes, bytes, runs per step, estimate;
// a click draws one's groups on the mesh and offers it on the topology view). Then a tree table of its
// leaves (filter by path, spec or mesh axis), a leaf's layout grid (shards nobody here holds faded),
// per-device memory, the processes of a multi-process run, the what-if of other Flax logical → mesh
// rules, and the diff of two snapshots or two processes. Leaves are read through the one leaf model
// (model/leaves.js).

import { ApiError } from "../lib/api.js";
import { afterPaint, defList, el, h, headedTable } from "../lib/dom.js";
import { showError } from "../lib/errors.js";
import { compactIds, fmtBytes, fmtDateTime } from "../lib/format.js";
import { collectivesSection } from "../components/collectives.js";
import { draw as drawWhy } from "../components/why.js";
import { layoutGrid } from "../components/grid.js";
import { leafTree } from "../components/leaf_tree.js";
import { memoryVerdict } from "../components/memory.js";
import { memoryTimeline } from "../components/memory_timeline.js";
import { planSummary } from "../components/plan.js";
import { leafName } from "../model/plan.js";
import { onTopology } from "../model/collective.js";
import { kindText, leafFacts, snapshotFacts } from "../model/facts.js";
import { deviceRow, Layout } from "../model/layout.js";
import { hostsOf, leafMatches, leafNow, mostTelling, notHeld, notHeldLegend, snapshotRef, topologyBase, whatIfOf } from "../model/leaves.js";
import { parseRules, rulesText } from "../model/rules.js";
import { topologyQuery } from "../model/state.js";
import { errorBox, lifetime, shareAndStatus } from "./common.js";
import { ID_PATTERN } from "../lib/vocabulary.js";

export const VIEW = "snapshots";

const KEYS = ["snapshot", "run", "process", "fix", "q", "axis", "kind", "leaf", "rules", "diff"];
/** @typedef {Record<string, string>} SState */
/** A share link's id, as the server makes them (128 random bits, URL-safe base64). */
const LINK_ID = new RegExp(`^${ID_PATTERN}$`);

/** @param {URLSearchParams} q @returns {SState} */
export function fromQuery(q) {
  return Object.fromEntries(KEYS.map((k) => [k, (q.get(k) || "").slice(0, 2000)]));
}

/** @param {SState} s */
export function toQuery(s) {
  const q = new URLSearchParams();
  for (const k of KEYS) if (s[k]) q.set(k, s[k]);
  return q.toString();
}

/** @param {string} label @param {string} value */
function option(label, value) {
  const o = el("option", "", label);
  o.value = value;
  return o;
}

/**
 * @param {HTMLElement} root
 * @param {import("../hosts/host.js").Host} host
 * @param {SState} initial
 */
export function mount(root, host, initial) {
  const data = host.data;
  /** @type {SState} */
  let state = { ...fromQuery(new URLSearchParams()), ...initial };
  /** @type {any} */
  let snap = null;
  /** @type {import("../model/leaves.js").WhatIf | null} */
  let whatif = null;
  /** @type {ReturnType<typeof leafTree> | null} */
  let tree = null;
  let filterTimer = 0;
  /** The collective chosen (undefined: none yet, the section shows the costliest). @type {number | undefined} */
  let chosen;
  /** The fix of the chosen collective shown tried (components/why.js), kept while the collective stays chosen. */
  /** @type {number | null} */
  let tried = null;
  /** The topology view's state for this snapshot's mesh (null: its devices cannot be shown there). */
  /** @type {ReturnType<typeof topologyBase>} */
  let onTopo = null;
  /** How many times the panel was opened (a snapshot drawn in pieces stops when another opens). */
  let opened = 0;
  const life = lifetime();

  // ---------------------------------------------------------------- DOM
  root.classList.add("snap-app");
  const title = h("h2", { class: "snap-title", part: "snap-title" }, "Snapshot");
  const snapError = errorBox("snap-error");
  const snapSummary = h("div", { class: "summary", part: "snap-summary" });
  const openWith = h("input", { type: "text", part: "open-with", spellcheck: "false", autocomplete: "off", placeholder: "a share link …/s/<id>, or a snapshot id" });
  const openForm = h("form", { class: "row open-form", part: "open-form" }, h("label", {}, "Open a snapshot ", openWith), h("button", { type: "submit" }, "Open"));
  const recentBox = h("div", { class: "recent", part: "recent" });
  const empty = h("div", { class: "snap-empty", part: "empty", hidden: true }, openForm, recentBox,
    h("p", {}, "Your program publishes one: ", h("code", {}, 'sharding_core.publish(tree, "name")'), " prints its link."),
    h("pre", {}, 'from sharding_core import publish\nurl = publish({"params": params, "opt_state": opt_state}, "step 0", rules=rules)\nprint(url)  # http://127.0.0.1:8000/s/…'));
  const processes = h("div", { class: "processes", part: "processes", hidden: true });
  const headBar = h("div", { class: "toolbar" }, title, h("span", { class: "spacer" }));
  const head = h("section", { class: "view snap-head", "aria-label": "Snapshot" }, headBar, snapError, snapSummary, empty, processes);
  shareAndStatus(headBar, host, () => Object.fromEntries(Object.entries(state).filter(([, v]) => v !== "")), (e) => showError(snapError, e));

  const filter = h("input", { type: "search", part: "filter", spellcheck: "false", autocomplete: "off", placeholder: "path, spec or axis, e.g. model or P('data'", "aria-label": "Filter leaves" });
  const axisFilter = h("select", { part: "axis-filter" }, option("any", ""));
  const kindFilter = h("select", { part: "kind-filter" },
    option("all", ""), option("arrays", "array"), option("planned (ShapeDtypeStruct, boxes)", "shape_dtype_struct"),
    option("shardings and specs", "sharding"), option("with logical axis names", "logical"), option("changed by the what-if", "changed"));
  const leafCount = h("p", { class: "muted", part: "leaf-count" });
  const leafTable = h("div", { class: "leaf-table", part: "leaf-table", tabindex: 0, "aria-label": "Leaves of the snapshot" });
  const leaves = h("section", { class: "view snap-leaves", "aria-label": "Leaves" },
    h("h2", {}, "Leaves"),
    h("div", { class: "row filters" }, h("label", {}, "Filter ", filter), h("label", {}, "Sharded over ", axisFilter), h("label", {}, "Kind ", kindFilter)),
    leafCount, leafTable);
  const leafTitle = h("h2", { class: "leaf-title", part: "leaf-title" }, "Leaf");
  const leafHint = h("p", { class: "muted", part: "leaf-hint" }, "Click a leaf to see its layout.");
  const leafSummary = h("div", { class: "summary", part: "leaf-summary" });
  const leafGrid = h("div", { class: "grid-wrap", part: "leaf-grid", hidden: true });
  const leafLegend = h("p", { class: "muted", part: "leaf-legend", hidden: true });
  const leafPanel = h("section", { class: "view snap-leaf", "aria-label": "Leaf" }, leafTitle, leafHint, leafSummary, leafGrid, leafLegend);
  const memoryFlag = h("p", { class: "memory-flag", part: "memory-flag" });
  const memoryChart = h("div", { class: "memory-chart", part: "memory-chart", role: "img", "aria-label": "Bytes per device" });
  const memoryTitle = h("h2", { part: "memory-title" }, "Memory per device");
  const memory = h("section", { class: "view snap-memory", "aria-label": "Memory per device" }, memoryTitle, memoryFlag, memoryChart);
  const rules = h("textarea", { rows: 4, part: "rules", spellcheck: "false", "aria-label": "Rules", placeholder: "('batch', 'data'), ('hidden', 'model'), ('embed', None)" });
  const applyRules = h("button", { type: "button", part: "apply-rules" }, "Apply rules");
  const resetRules = h("button", { type: "button", part: "reset-rules" }, "Back to captured");
  const whatifStatus = h("span", { class: "muted", role: "status", part: "whatif-status" });
  const whatifError = errorBox("whatif-error");
  const whatifBox = h("section", { class: "view snap-whatif", "aria-label": "What-if" },
    h("h2", {}, "What-if: logical → mesh rules"),
    h("p", { class: "muted" }, "Leaves with Flax logical axis names are re-laid out under these rules, as ", h("code", {}, "flax.linen.logical_to_mesh_axes"),
      " would (in order of precedence; a mesh axis is used once per array)."),
    h("span", { class: "field-title" }, "Rules"), rules,
    h("div", { class: "toolbar" }, applyRules, resetRules, whatifStatus), whatifError);
  whatifBox.hidden = !data.whatif;
  const diffWith = h("input", { type: "text", part: "diff-with", spellcheck: "false", autocomplete: "off", placeholder: "a share link, a snapshot id, or process 1" });
  const diffProcess = h("select", { part: "diff-process" });
  const diffProcessField = h("label", { part: "diff-process-field", hidden: true }, "or a process ", diffProcess);
  const diffRun = h("button", { type: "button", part: "diff-run" }, "Compare");
  const diffClear = h("button", { type: "button", part: "diff-clear" }, "Clear");
  const diffStatus = h("span", { class: "muted", role: "status", part: "diff-status" });
  const diffError = errorBox("diff-error");
  const diffResult = h("div", { class: "table-wrap diff-result", part: "diff-result" });
  const diffBox = h("section", { class: "view snap-diff", "aria-label": "Diff" },
    h("h2", {}, "Diff"),
    h("div", { class: "row" }, h("label", {}, "Compare with ", diffWith), diffProcessField),
    h("div", { class: "toolbar" }, diffRun, diffClear, diffStatus), diffError, diffResult);
  diffBox.hidden = !data.diff;
  const planBox = h("section", { class: "view snap-plan", part: "plan", "aria-label": "Plan", hidden: true });
  const timelineBox = h("section", { class: "view snap-timeline", part: "memory-timeline", "aria-label": "Memory over program order", hidden: true });
  const collTitle = h("h2", { part: "collectives-title" }, "Collectives (compiled HLO)");
  const collBox = h("div", { class: "collectives-section" });
  const collSection = h("section", { class: "view snap-collectives", part: "collectives-section", "aria-label": "Collectives", hidden: true },
    collTitle, h("p", { class: "muted" }, "Every collective XLA put in the program: its mesh axes, bytes, how many times it runs per step (loops) and its estimate. Click one to see its device groups on the mesh."),
    collBox);
  // a plan or a capture of a program leads with its verdict and its collectives; the leaves follow
  root.replaceChildren(head, planBox, timelineBox, collSection, h("div", { class: "snap-pair" }, leaves, leafPanel), memory, whatifBox, diffBox);

  /** @param {boolean} replace */
  const save = (replace) => host.save({ ...state }, replace);

  // ---------------------------------------------------------------- leaves

  const now = (/** @type {number} */ i) => leafNow(snap, whatif, i);

  /** The parameter an inspect_jit capture's inputs/args/N was passed as (null: not one, or unknown). @param {string} key */
  const argumentOf = (key) => {
    const m = /^inputs\/args\/(\d+)$/.exec(key);
    const names = snap?.jit?.arguments;
    return m && names ? names[Number(m[1])] ?? null : null;
  };

  function applyFilter() {
    if (!tree) return;
    const f = { q: state.q, axis: state.axis, kind: state.kind };
    const count = tree.filter((i) => leafMatches(snap, whatif, i, f));
    const total = snap.leaves.length;
    leafCount.textContent = count === total ? `${total} leaves` : `${count} of ${total} leaves match`;
  }

  /** @param {number} i @param {boolean} push */
  function selectLeaf(i, push) {
    const leaf = snap.leaves[i];
    state.leaf = leaf ? leaf.path : "";
    if (push) save(false);
    tree?.select(state.leaf);
    renderLeaf();
    // one column (narrow windows): bring the leaf's grid into view; beside the table it is sticky
    if (push && leafPanel.getBoundingClientRect().top > window.innerHeight * 0.8) leafPanel.scrollIntoView({ block: "start" });
  }

  function renderLeaf() {
    const named = snap ? snap.leaves.findIndex((/** @type {any} */ l) => l.path === state.leaf) : -1;
    // none named: the most telling leaf (split into the most blocks) opens
    const i = named >= 0 || !snap ? named : mostTelling(snap);
    if (i >= 0 && named < 0) tree?.select(snap.leaves[i].path);
    leafHint.hidden = i >= 0;
    if (i < 0) {
      leafTitle.textContent = "Leaf";
      leafSummary.replaceChildren();
      leafGrid.hidden = leafLegend.hidden = true;
      return;
    }
    const leaf = snap.leaves[i];
    const v = now(i);
    const lay = v.layout;
    const argument = argumentOf(leaf.path.split("/").slice(0, 3).join("/"));
    leafTitle.textContent = leaf.path + (argument ? ` — argument ${argument}` : "");
    const held = lay ? notHeld(leaf, lay) : new Set();
    leafSummary.replaceChildren(defList(leafFacts(snap, leaf, v, held)));
    if (!lay) {
      leafGrid.hidden = leafLegend.hidden = true;
      return;
    }
    leafGrid.hidden = false;
    layoutGrid(leafGrid, Layout.fromSnapshot(snap, lay, leaf.mesh), { dark: host.dark(), interactive: false, faded: held, maxHeight: 420 });
    leafGrid.dataset.path = leaf.path;
    leafLegend.hidden = held.size === 0;
    leafLegend.textContent = notHeldLegend(leaf);
  }

  // ---------------------------------------------------------------- memory, header, processes, collectives

  async function plotMemory() {
    const platform = String(snap.platform).toUpperCase();
    const next = whatif ? whatif.memory : null;
    // a compiled program's snapshot holds its arguments and outputs: the chart is theirs, not XLA's peak
    const program = Boolean(snap.jit?.memory_per_device);
    memoryTitle.textContent = program ? "Arguments and outputs per device" : "Memory per device";
    memoryVerdict(memoryFlag, snap.memory, next, platform, program ? "Arguments and outputs (not temporaries: XLA's peak is in the plan above)" : "Captured");
    await host.memoryChart?.(memoryChart, { mem: snap.memory, next, platform, hostOf: hostsOf(snap), dark: host.dark() });
    host.mark("plottedAt");
  }

  function renderHead() {
    const runInfo = snap.processes;
    const platform = String(snap.platform).toUpperCase();
    title.textContent = snap.name + (runInfo ? ` — run of ${runInfo.count} process${runInfo.count > 1 ? "es" : ""}` : "") + (state.fix ? ` — compiled again with a fix (fixes[${state.fix}])` : "");
    snapSummary.replaceChildren(defList(snapshotFacts(snap)));
    processes.replaceChildren();
    processes.hidden = !runInfo && !state.run;
    if (runInfo) {
      processes.appendChild(el("h3", "", `Processes: ${runInfo.reported.length} of ${runInfo.count} reported`));
      if (runInfo.missing.length) processes.appendChild(el("p", "warn", `Missing: process ${runInfo.missing.join(", ")} — their shards are shown faded.`));
      const { table, body } = headedTable("procs", ["process", "status", "devices"]);
      runInfo.devices.forEach((/** @type {number[]} */ ids, /** @type {number} */ p) => {
        const ok = runInfo.reported.includes(p);
        body.insertRow().append(el("td", "", String(p)), el("td", ok ? "" : "bad", ok ? "reported" : "missing"), el("td", "", `${platform} ${compactIds(ids)}`));
      });
      processes.appendChild(h("div", { class: "table-wrap" }, table));
      diffProcess.replaceChildren(option("—", ""), ...runInfo.reported.map((/** @type {number} */ p) => option(`process ${p}`, String(p))));
      diffProcessField.hidden = false;
    } else if (state.run) {
      processes.appendChild(el("p", "", `Process ${state.process} of run ${state.run.slice(0, 6)}…`));
    }
    renderPlan();
    const axes = new Set();
    for (const m of snap.meshes) for (const a of m.axis_names) axes.add(a);
    axisFilter.replaceChildren(option("any", ""), ...[...axes, "(replicated)", "(not split)"].map((a) => option(a, a)));
    axisFilter.value = state.axis;
  }

  /** A plan's (or an inspect_jit capture's) verdict, HBM by kind, step time and roofline (components/plan.js). */
  function renderPlan() {
    planBox.hidden = !snap.plan;
    planSummary(planBox, snap, { dark: host.dark() });
    memoryTimeline(timelineBox, snap.memory_timeline, { dark: host.dark() });
  }

  /**
   * The collectives section (components/collectives.js collectivesSection): the table, the total, the chosen
   * collective's groups on the mesh and its address on the topology view; `slot` under them is where a
   * panel draws more about the chosen collective (docs/frontend.md).
   */
  function renderCollectives() {
    const coll = snap.collectives || [];
    collSection.hidden = !coll.length;
    if (!coll.length) return;
    const runs = coll.reduce((/** @type {number} */ n, /** @type {any} */ c) => n + (c.repeat ?? 1), 0);
    collTitle.textContent = `Collectives (compiled HLO): ${coll.length}${runs > coll.length ? `, ${runs} runs per step` : ""}`;
    onTopo = topologyBase(snap);
    collectivesSection(collBox, coll, {
      mesh: snap.meshes.length ? snap.meshes[0] : deviceRow(snap.devices.id),
      dark: host.dark(),
      selected: chosen,
      total: true,
      topology: (c) => (onTopo && host.href ? host.href("topology", topologyQuery(onTopology(onTopo, c))) : null),
      linkTarget: host.kind === "widget" ? "_blank" : undefined,
      onSelect: (c, i, slot) => {
        if (i !== chosen) tried = null;
        chosen = i;
        drawWhy(slot, c, whyOptions());
        host.bump("collective");
      },
    });
  }

  /**
   * What the why view can do with a fix here: show the program the snapshot carries for it (both hosts); on
   * the dashboard, diff it against this one in place, and open or compare it (a reference `{"snapshot": id,
   * "fix": k}`). A fix's own program has no fixes.
   * @returns {import("../components/why.js").WhyOpts}
   */
  function whyOptions() {
    const stored = Boolean(data.diff && (state.snapshot || state.run) && !state.fix);
    const address = (/** @type {string} */ fix) => toQuery({ snapshot: state.snapshot, run: state.run, process: state.process, fix });
    const href = host.href;
    return {
      program: (fix) => snap.fixes?.[fix.result] ?? null,
      diff: stored && data.diff ? (fix) => /** @type {NonNullable<typeof data.diff>} */ (data.diff)(snapshotRef(state), snapshotRef({ ...state, fix: String(fix.result) })) : null,
      open: stored && href ? (fix) => href("snapshots", address(String(fix.result))) : null,
      compare: stored && href ? (fix) => href("compare", new URLSearchParams({ a: href("snapshots", address("")), b: href("snapshots", address(String(fix.result))) }).toString()) : null,
      cannot: stored ? undefined : host.kind === "widget"
        ? "In the notebook: the fix's program as it compiled, carried in this snapshot (no server). Diff and Compare run on the dashboard: publish this snapshot (Publish to dashboard) and try the fix there."
        : undefined,
      linkTarget: host.kind === "widget" ? "_blank" : undefined,
      leafName: (path) => leafName(path, snap.jit?.arguments),
      tried: tried ?? undefined,
      onTry: (k) => {
        tried = k;
        host.bump("tried");
      },
    };
  }

  // ---------------------------------------------------------------- what-if

  function defaultRules() {
    if (snap.rules) return rulesText(snap.rules);
    const withRules = snap.leaves.find((/** @type {any} */ l) => l.rules);
    return withRules ? rulesText(withRules.rules) : "";
  }

  /** @param {string} text @param {boolean} push */
  async function runWhatif(text, push) {
    showError(whatifError, null);
    if (!text.trim()) {
      whatif = null;
      state.rules = "";
      if (push) save(false);
      whatifStatus.textContent = "";
      return refreshAll();
    }
    let parsed;
    try {
      parsed = parseRules(text);
    } catch (e) {
      showError(whatifError, e);
      return;
    }
    const ask = data.whatif;
    if (!ask) return;
    whatifStatus.textContent = "computing…";
    try {
      const res = await ask(snapshotRef(state), parsed);
      whatif = whatIfOf(res);
      state.rules = text;
      if (push) save(false);
      whatifStatus.textContent = `${res.leaves.length} logically named leaves: ${res.changed} change, ${res.errors} cannot be laid out`;
      host.bump("whatif");
    } catch (e) {
      whatifStatus.textContent = "";
      showError(whatifError, e);
      return;
    }
    return refreshAll();
  }

  function refreshAll() {
    applyFilter();
    renderLeaf();
    return plotMemory();
  }

  // ---------------------------------------------------------------- diff

  /**
   * What a "compare with" text names: "process N" of this run, a pasted share link (resolved through the
   * stored link to the snapshot it shows), a snapshots address, or a snapshot id.
   * @param {string} text
   */
  async function otherRef(text) {
    const t = text.trim();
    const proc = /^process\s*(\d+)$/i.exec(t);
    if (proc && state.run) return { run: state.run, process: Number(proc[1]) };
    const shared = /\/s\/([^/?#\s]*)/.exec(t);
    if (shared) {
      if (!LINK_ID.test(shared[1])) {
        throw new ApiError(400, {
          code: "bad_link",
          message: `"${shared[1].slice(0, 80)}" is not a share link's id: ids are 22 to 64 letters, digits, - and _ (the link may have been cut when it was copied)`,
          hint: "copy the whole link again from where it was shared",
        });
      }
      const stored = await /** @type {NonNullable<typeof data.link>} */ (data.link)(shared[1]);
      const s = stored.state || {};
      if (s.run) return s.process !== undefined && s.process !== "" ? { run: s.run, process: Number(s.process) } : { run: s.run };
      if (s.snapshot) return { snapshot: s.snapshot };
      throw new Error(`that link opens the ${stored.view} view, not a snapshot`);
    }
    const q = /[?&](snapshot|run)=([A-Za-z0-9_-]+)/.exec(t);
    if (q) return q[1] === "run" ? { run: q[2] } : { snapshot: q[2] };
    if (LINK_ID.test(t)) return { snapshot: t };
    throw new Error('paste a share link (…/s/<id>), a snapshot id, or "process N" in a run');
  }

  /** @param {string} text @param {boolean} push */
  async function runDiff(text, push) {
    showError(diffError, null);
    if (!text.trim()) {
      diffResult.replaceChildren();
      state.diff = "";
      if (push) save(false);
      return;
    }
    const ask = data.diff;
    if (!ask) return;
    diffStatus.textContent = "comparing…";
    try {
      const res = await ask(snapshotRef(state), await otherRef(text));
      state.diff = text.trim();
      if (push) save(false);
      const s = res.summary;
      diffStatus.textContent = "";
      const { table, body } = headedTable("procs diff", ["path", "status", "here", "there", "bytes to move"]);
      for (const r of res.leaves.slice(0, 2000)) {
        const b = h("button", { type: "button", class: "link" }, r.path);
        b.addEventListener("click", () => {
          const i = snap.leaves.findIndex((/** @type {any} */ l) => l.path === r.path);
          if (i >= 0) selectLeaf(i, true);
        });
        body.insertRow().append(h("td", {}, b), el("td", r.status, r.status), el("td", "mono", r.a_spec || "—"), el("td", "mono", r.b_spec || "—"), el("td", "num", fmtBytes(r.bytes_to_move)));
      }
      diffResult.replaceChildren(
        el("p", "diff-summary", `${s.changed} changed, ${s.added} added, ${s.removed} removed, ${s.same} the same; ${fmtBytes(s.bytes_to_move)} would move (bytes each device must receive).`),
        table,
      );
      host.bump("diffs");
    } catch (e) {
      diffStatus.textContent = "";
      showError(diffError, e);
    }
  }

  // ---------------------------------------------------------------- recently opened (the page's browser only)

  function remember() {
    const q = new URLSearchParams();
    for (const k of ["snapshot", "run", "process"]) if (state[k]) q.set(k, state[k]);
    host.recent?.remember({
      href: `/snapshots.html?${q}`,
      name: String(snap.name).slice(0, 200),
      what: `${snap.leaves.length} leaves on ${snap.devices.id.length} ${snap.platform} devices`,
    });
  }

  function renderRecent() {
    const recent = host.recent;
    const list = recent ? recent.list() : [];
    recentBox.replaceChildren();
    if (!recent || !list.length) {
      recentBox.appendChild(el("p", "muted", "Snapshots you open are listed here (kept in this browser only; the server lists none: a share link is what opens one)."));
      return;
    }
    const ul = el("ul");
    for (const r of list) ul.appendChild(h("li", {}, h("a", { href: r.href }, r.name || "(unnamed)"), el("span", "muted", `${r.what} · ${fmtDateTime(r.at)}`)));
    const forget = h("button", { type: "button", class: "link" }, "forget this list");
    forget.addEventListener("click", () => {
      recent.forget();
      renderRecent();
    });
    recentBox.append(el("h3", "", "Recently opened in this browser"), ul, forget);
  }

  // ---------------------------------------------------------------- loading

  function showEmpty() {
    empty.hidden = false;
    root.classList.add("no-snapshot");
    renderRecent();
  }

  /**
   * Draws the snapshot in the order a reader looks at it, each piece after the previous one is on screen: the
   * head and a plan's verdict first (from the snapshot alone), then the collectives and the chosen one's why,
   * then the leaves and a leaf's layout, then memory (Plotly's chart last, loaded only then).
   * @param {number} turn this opening's number: a newer opening stops it
   */
  async function start(turn) {
    empty.hidden = Boolean(snap);
    root.classList.toggle("no-snapshot", !snap);
    if (!snap) {
      title.textContent = "Snapshots";
      snapSummary.replaceChildren();
      renderRecent();
      return;
    }
    renderHead();
    const current = async () => {
      await afterPaint();
      return turn === opened && !life.disposed;
    };
    if (!(await current())) return;
    remember();
    renderCollectives();
    if (!(await current())) return;
    tree = leafTree(leafTable, snap.leaves, {
      now,
      kind: kindText,
      name: argumentOf,
      onOpen: (i) => selectLeaf(i, true),
      onRows: () => {
        // For bench/bench_snapshots.py: when the table first had rows (ms since this page's navigation).
        host.mark("rowsAt");
      },
    });
    tree.body.dataset.part = "leaf-rows";
    tree.select(state.leaf);
    filter.value = state.q;
    kindFilter.value = state.kind;
    rules.value = state.rules || defaultRules();
    if (state.rules) await runWhatif(state.rules, false);
    else {
      applyFilter();
      if (!(await current())) return;
      renderLeaf();
      if (!(await current())) return;
      await plotMemory();
    }
    if (turn !== opened || life.disposed) return;
    host.bump("rendered");
    if (state.diff) {
      diffWith.value = state.diff;
      await runDiff(state.diff, false);
    }
  }

  /** (Re)opens the panel at `next`: on arrival, and after back or forward. @param {SState} next */
  async function open(next) {
    const turn = ++opened;
    showError(snapError, null);
    state = { ...fromQuery(new URLSearchParams()), ...next };
    snap = null;
    whatif = null;
    tree = null;
    chosen = undefined;
    tried = null;
    try {
      if ((state.snapshot || state.run) && data.snapshot) snap = await data.snapshot(snapshotRef(state));
      if (life.disposed || turn !== opened) return;
      await start(turn);
    } catch (e) {
      showError(snapError, e);
      showEmpty();
    }
    host.bump("loaded");
  }

  filter.addEventListener("input", () => {
    clearTimeout(filterTimer);
    filterTimer = window.setTimeout(() => {
      state.q = filter.value;
      save(true);
      applyFilter();
      host.bump("filtered");
    }, 80);
  });
  for (const [box, key] of /** @type {[HTMLSelectElement, string][]} */ ([[axisFilter, "axis"], [kindFilter, "kind"]])) {
    box.addEventListener("change", () => {
      state[key] = box.value;
      save(false);
      applyFilter();
      host.bump("filtered");
    });
  }
  applyRules.addEventListener("click", () => runWhatif(rules.value, true));
  resetRules.addEventListener("click", () => {
    rules.value = defaultRules();
    runWhatif("", true);
  });
  diffRun.addEventListener("click", () => runDiff(diffWith.value || (diffProcess.value ? `process ${diffProcess.value}` : ""), true));
  diffClear.addEventListener("click", () => {
    diffWith.value = "";
    runDiff("", true);
  });
  openForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const ref = await otherRef(openWith.value);
      host.go?.("snapshots", new URLSearchParams(Object.entries(ref).map(([k, v]) => [k, String(v)])).toString());
    } catch (err) {
      showError(snapError, err);
    }
  });
  life.add(() => clearTimeout(filterTimer));
  life.add(host.onTheme(() => {
    if (!snap) return;
    renderPlan();
    renderCollectives();
    refreshAll();
  }));
  open(state);

  return {
    update: (next) => open(next),
    dispose: life.dispose,
  };
}
