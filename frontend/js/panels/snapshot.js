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
import { findingsSection, valuesSection } from "../components/findings.js";
import { draw as drawWhy } from "../components/why.js";
import { layoutGrid } from "../components/grid.js";
import { leafTree } from "../components/leaf_tree.js";
import { memoryVerdict } from "../components/memory.js";
import { memoryTimeline } from "../components/memory_timeline.js";
import { planSummary } from "../components/plan.js";
import { searchSection } from "../components/search.js";
import { leafName } from "../model/plan.js";
import { memoryOf } from "../model/program.js";
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
 * What the cards of one panel share: the panel's state (its address), the snapshot open (null: none), the
 * what-if's result (null: the captured layouts), and how the state is kept.
 * @typedef {{state: SState, snap: any, whatif: import("../model/leaves.js").WhatIf | null, save: (replace: boolean) => void}} Opened
 */

/**
 * What a "compare with" (or "open") text names: "process N" of this run, a pasted share link (resolved through
 * the stored link to the snapshot it shows), a snapshots address, or a snapshot id.
 * @param {string} text
 * @param {SState} state
 * @param {import("../hosts/host.js").Data} data
 */
async function otherRef(text, state, data) {
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

/**
 * The card at the top: the snapshot's name and facts, the processes of a run, or (none open) the form to open
 * one and the snapshots recently opened in this browser.
 * @param {HTMLElement} parent
 * @param {import("../hosts/host.js").Host} host
 * @param {Opened} at
 */
function mountHead(parent, host, at) {
  const title = h("h2", { class: "snap-title", part: "snap-title" }, "Snapshot");
  const error = errorBox("snap-error");
  const summary = h("div", { class: "summary", part: "snap-summary" });
  const openWith = h("input", { type: "text", part: "open-with", spellcheck: "false", autocomplete: "off", placeholder: "a share link …/s/<id>, or a snapshot id" });
  const openForm = h("form", { class: "row open-form", part: "open-form" }, h("label", {}, "Open a snapshot ", openWith), h("button", { type: "submit" }, "Open"));
  const recentBox = h("div", { class: "recent", part: "recent" });
  const empty = h("div", { class: "snap-empty", part: "empty", hidden: true }, openForm, recentBox,
    h("p", {}, "Your program publishes one: ", h("code", {}, 'sharding_core.publish(tree, "name")'), " prints its link."),
    h("pre", {}, 'from sharding_core import publish\nurl = publish({"params": params, "opt_state": opt_state}, "step 0", rules=rules)\nprint(url)  # http://127.0.0.1:8000/s/…'));
  const processes = h("div", { class: "processes", part: "processes", hidden: true });
  const headBar = h("div", { class: "toolbar" }, title, h("span", { class: "spacer" }));
  parent.append(h("section", { class: "view snap-head", "aria-label": "Snapshot" }, headBar, error, summary, empty, processes));
  shareAndStatus(headBar, host, () => Object.fromEntries(Object.entries(at.state).filter(([, v]) => v !== "")), (e) => showError(error, e));
  openForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const ref = await otherRef(openWith.value, at.state, host.data);
      host.go?.("snapshots", new URLSearchParams(Object.entries(ref).map(([k, v]) => [k, String(v)])).toString());
    } catch (err) {
      showError(error, err);
    }
  });

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

  return {
    error,
    /**
     * The form to open one and the recent list, `root` marked: none asked for (`none`: the title says
     * "Snapshots"), or the one asked for did not open (the error says why).
     * @param {HTMLElement} root @param {boolean} none
     */
    showEmpty(root, none) {
      empty.hidden = false;
      root.classList.add("no-snapshot");
      if (none) {
        title.textContent = "Snapshots";
        summary.replaceChildren();
      }
      renderRecent();
    },
    /** The name, the facts and the processes. @param {(runInfo: any) => void} onProcesses */
    render(onProcesses) {
      const { snap, state } = at;
      empty.hidden = true;
      const runInfo = snap.processes;
      const platform = String(snap.platform).toUpperCase();
      title.textContent = snap.name + (runInfo ? ` — run of ${runInfo.count} process${runInfo.count > 1 ? "es" : ""}` : "") + (state.fix ? ` — compiled again with a fix (fixes[${state.fix}])` : "");
      summary.replaceChildren(defList(snapshotFacts(snap)));
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
        onProcesses(runInfo);
      } else if (state.run) {
        processes.appendChild(el("p", "", `Process ${state.process} of run ${state.run.slice(0, 6)}…`));
      }
    },
    /** The snapshot opened, in this browser's recent list (the page's host only). */
    remember() {
      const { snap, state } = at;
      const q = new URLSearchParams();
      for (const k of ["snapshot", "run", "process"]) if (state[k]) q.set(k, state[k]);
      host.recent?.remember({
        href: `/snapshots.html?${q}`,
        name: String(snap.name).slice(0, 200),
        what: `${snap.leaves.length} leaves on ${snap.devices.id.length} ${snap.platform} devices`,
      });
    },
  };
}

/**
 * The card "Plan": a plan's (or an inspect_jit capture's) verdict, HBM by kind, step time and roofline
 * (components/plan.js), from the snapshot alone: the lead; under it, memory over program order with the
 * buffers at XLA's peak (components/memory_timeline.js).
 * @param {HTMLElement} parent
 * @param {import("../hosts/host.js").Host} host
 * @param {Opened} at
 */
function mountPlan(parent, host, at) {
  const box = h("section", { class: "view snap-plan", part: "plan", "aria-label": "Plan", hidden: true });
  const timeline = h("section", { class: "view snap-timeline", part: "memory-timeline", "aria-label": "Memory over program order", hidden: true });
  parent.append(box, timeline);
  return {
    render() {
      box.hidden = !at.snap.plan;
      planSummary(box, at.snap, { dark: host.dark() });
      memoryTimeline(timeline, at.snap.memory_timeline, { dark: host.dark() });
    },
  };
}

/**
 * The card "Search": the search a pick's plan came from (components/search.js): the front of step time against
 * peak HBM, every candidate and what it lost on, the pick against the current sharding; first, before the plan.
 * @param {HTMLElement} parent
 * @param {import("../hosts/host.js").Host} host
 * @param {Opened} at
 */
function mountSearch(parent, host, at) {
  const box = h("section", { class: "view snap-search", part: "search-section", "aria-label": "Search", hidden: true });
  parent.append(box);
  return { render: () => searchSection(box, at.snap, { dark: host.dark() }) };
}

/**
 * The cards "Findings" (the waste a plan or capture found, each with its bytes per step, line and checked fix:
 * first, before the plan) and "Values" (every value's sharding along the program, largest first, after the
 * collectives), from the snapshot alone (components/findings.js).
 * @param {HTMLElement} parent
 * @param {"findings" | "values"} which
 * @param {Opened} at
 */
function mountFindingsOrValues(parent, which, at) {
  const label = which === "findings" ? "Findings" : "Values";
  const box = h("section", { class: `view snap-${which}`, part: `${which}-section`, "aria-label": label, hidden: true });
  parent.append(box);
  return {
    render() {
      if (which === "findings") findingsSection(box, at.snap);
      else valuesSection(box, at.snap);
    },
  };
}

/**
 * The card "Collectives": the collectives section (components/collectives.js collectivesSection): the table,
 * the total, the chosen collective's groups on the mesh and its address on the topology view; the slot under
 * them holds the chosen collective's why (docs/frontend.md).
 * @param {HTMLElement} parent
 * @param {import("../hosts/host.js").Host} host
 * @param {Opened} at
 */
function mountCollectives(parent, host, at) {
  const data = host.data;
  const title = h("h2", { part: "collectives-title" }, "Collectives (compiled HLO)");
  const box = h("div", { class: "collectives-section" });
  const section = h("section", { class: "view snap-collectives", part: "collectives-section", "aria-label": "Collectives", hidden: true },
    title, h("p", { class: "muted" }, "Every collective XLA put in the program: its mesh axes, bytes, how many times it runs per step (loops) and its estimate. Click one to see its device groups on the mesh."),
    box);
  parent.append(section);
  /** The collective chosen (undefined: none yet, the section shows the costliest). @type {number | undefined} */
  let chosen;
  /** The fix of the chosen collective shown tried (components/why.js), kept while the collective stays chosen. */
  /** @type {number | null} */
  let tried = null;

  /**
   * What the why view can do with a fix here: show the program the snapshot carries for it (both hosts); on
   * the dashboard, diff it against this one in place, and open or compare it (a reference `{"snapshot": id,
   * "fix": k}`). A fix's own program has no fixes.
   * @returns {import("../components/why.js").WhyOpts}
   */
  function whyOptions() {
    const { snap, state } = at;
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

  return {
    /** Another snapshot: none chosen, none tried. */
    reset() {
      chosen = undefined;
      tried = null;
    },
    render() {
      const snap = at.snap;
      const coll = snap.collectives || [];
      section.hidden = !coll.length;
      if (!coll.length) return;
      const runs = coll.reduce((/** @type {number} */ n, /** @type {any} */ c) => n + (c.repeat ?? 1), 0);
      title.textContent = `Collectives (compiled HLO): ${coll.length}${runs > coll.length ? `, ${runs} runs per step` : ""}`;
      // the topology view's state for this snapshot's mesh (null: its devices cannot be shown there)
      const onTopo = topologyBase(snap);
      collectivesSection(box, coll, {
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
    },
  };
}

/**
 * The card "Leaf": the chosen leaf's facts and layout grid (shards nobody here holds faded).
 * @param {HTMLElement} parent
 * @param {import("../hosts/host.js").Host} host
 * @param {Opened} at
 * @param {(key: string) => string | null} argumentOf
 */
function mountLeaf(parent, host, at, argumentOf) {
  const title = h("h2", { class: "leaf-title", part: "leaf-title" }, "Leaf");
  const hint = h("p", { class: "muted", part: "leaf-hint" }, "Click a leaf to see its layout.");
  const summary = h("div", { class: "summary", part: "leaf-summary" });
  const grid = h("div", { class: "grid-wrap", part: "leaf-grid", hidden: true });
  const legend = h("p", { class: "muted", part: "leaf-legend", hidden: true });
  const panel = h("section", { class: "view snap-leaf", "aria-label": "Leaf" }, title, hint, summary, grid, legend);
  parent.append(panel);
  return {
    panel,
    /** Leaf `i` (-1: none). @param {number} i */
    render(i) {
      const snap = at.snap;
      hint.hidden = i >= 0;
      if (i < 0) {
        title.textContent = "Leaf";
        summary.replaceChildren();
        grid.hidden = legend.hidden = true;
        return;
      }
      const leaf = snap.leaves[i];
      const v = leafNow(snap, at.whatif, i);
      const lay = v.layout;
      const argument = argumentOf(leaf.path.split("/").slice(0, 3).join("/"));
      title.textContent = leaf.path + (argument ? ` — argument ${argument}` : "");
      const held = lay ? notHeld(leaf, lay) : new Set();
      summary.replaceChildren(defList(leafFacts(snap, leaf, v, held)));
      if (!lay) {
        grid.hidden = legend.hidden = true;
        return;
      }
      grid.hidden = false;
      layoutGrid(grid, Layout.fromSnapshot(snap, lay, leaf.mesh), { dark: host.dark(), interactive: false, faded: held, maxHeight: 420 });
      grid.dataset.path = leaf.path;
      legend.hidden = held.size === 0;
      legend.textContent = notHeldLegend(leaf);
    },
  };
}

/**
 * The cards "Leaves" and "Leaf", side by side: a tree table of the leaves (filtered by path, spec, mesh axis or
 * kind) and the chosen leaf's layout.
 * @param {HTMLElement} parent
 * @param {import("../hosts/host.js").Host} host
 * @param {Opened} at
 */
function mountLeaves(parent, host, at) {
  const filter = h("input", { type: "search", part: "filter", spellcheck: "false", autocomplete: "off", placeholder: "path, spec or axis, e.g. model or P('data'", "aria-label": "Filter leaves" });
  const axisFilter = h("select", { part: "axis-filter" }, option("any", ""));
  const kindFilter = h("select", { part: "kind-filter" },
    option("all", ""), option("arrays", "array"), option("planned (ShapeDtypeStruct, boxes)", "shape_dtype_struct"),
    option("shardings and specs", "sharding"), option("with logical axis names", "logical"), option("changed by the what-if", "changed"));
  const count = h("p", { class: "muted", part: "leaf-count" });
  const table = h("div", { class: "leaf-table", part: "leaf-table", tabindex: 0, "aria-label": "Leaves of the snapshot" });
  const pair = h("div", { class: "snap-pair" }, h("section", { class: "view snap-leaves", "aria-label": "Leaves" },
    h("h2", {}, "Leaves"),
    h("div", { class: "row filters" }, h("label", {}, "Filter ", filter), h("label", {}, "Sharded over ", axisFilter), h("label", {}, "Kind ", kindFilter)),
    count, table));
  parent.append(pair);
  /** The parameter an inspect_jit capture's inputs/args/N was passed as (null: not one, or unknown). @param {string} key */
  const argumentOf = (key) => {
    const m = /^inputs\/args\/(\d+)$/.exec(key);
    const names = at.snap?.jit?.arguments;
    return m && names ? names[Number(m[1])] ?? null : null;
  };
  const leaf = mountLeaf(pair, host, at, argumentOf);
  /** @type {ReturnType<typeof leafTree> | null} */
  let tree = null;
  let filterTimer = 0;

  const card = {
    filter() {
      if (!tree) return;
      const { snap, whatif, state } = at;
      const f = { q: state.q, axis: state.axis, kind: state.kind };
      const n = tree.filter((i) => leafMatches(snap, whatif, i, f));
      const total = snap.leaves.length;
      count.textContent = n === total ? `${total} leaves` : `${n} of ${total} leaves match`;
    },
    /** The leaf the state names (none named: the most telling leaf, split into the most blocks). */
    renderLeaf() {
      const snap = at.snap;
      const named = snap ? snap.leaves.findIndex((/** @type {any} */ l) => l.path === at.state.leaf) : -1;
      const i = named >= 0 || !snap ? named : mostTelling(snap);
      if (i >= 0 && named < 0) tree?.select(snap.leaves[i].path);
      leaf.render(i);
    },
    /** @param {number} i @param {boolean} push */
    select(i, push) {
      const l = at.snap.leaves[i];
      at.state.leaf = l ? l.path : "";
      if (push) at.save(false);
      tree?.select(at.state.leaf);
      card.renderLeaf();
      // one column (narrow windows): bring the leaf's grid into view; beside the table it is sticky
      if (push && leaf.panel.getBoundingClientRect().top > window.innerHeight * 0.8) leaf.panel.scrollIntoView({ block: "start" });
    },
    /** The mesh axes to filter by, from the snapshot's meshes. */
    axes() {
      const axes = new Set();
      for (const m of at.snap.meshes) for (const a of m.axis_names) axes.add(a);
      axisFilter.replaceChildren(option("any", ""), ...[...axes, "(replicated)", "(not split)"].map((a) => option(a, a)));
      axisFilter.value = at.state.axis;
    },
    /** The tree table of the snapshot's leaves, its filters from the state. */
    build() {
      const { snap, state } = at;
      tree = leafTree(table, snap.leaves, {
        now: (i) => leafNow(at.snap, at.whatif, i),
        kind: kindText,
        name: argumentOf,
        onOpen: (i) => card.select(i, true),
        onRows: () => {
          // For bench/bench_snapshots.py: when the table first had rows (ms since this page's navigation).
          host.mark("rowsAt");
        },
      });
      tree.body.dataset.part = "leaf-rows";
      tree.select(state.leaf);
      filter.value = state.q;
      kindFilter.value = state.kind;
    },
    /** Another snapshot: no tree yet. */
    reset() {
      tree = null;
    },
    dispose: () => clearTimeout(filterTimer),
  };
  filter.addEventListener("input", () => {
    clearTimeout(filterTimer);
    filterTimer = window.setTimeout(() => {
      at.state.q = filter.value;
      at.save(true);
      card.filter();
      host.bump("filtered");
    }, 80);
  });
  for (const [box, key] of /** @type {[HTMLSelectElement, string][]} */ ([[axisFilter, "axis"], [kindFilter, "kind"]])) {
    box.addEventListener("change", () => {
      at.state[key] = box.value;
      at.save(false);
      card.filter();
      host.bump("filtered");
    });
  }
  return card;
}

/**
 * The card "Memory per device": the captured bytes per device against the chip's capacity (a compiled
 * program's: its arguments and outputs, XLA's peak being the plan's), and the what-if's beside them.
 * @param {HTMLElement} parent
 * @param {import("../hosts/host.js").Host} host
 * @param {Opened} at
 */
function mountMemory(parent, host, at) {
  const flag = h("p", { class: "memory-flag", part: "memory-flag" });
  const chart = h("div", { class: "memory-chart", part: "memory-chart", role: "img", "aria-label": "Bytes per device" });
  const title = h("h2", { part: "memory-title" }, "Memory per device");
  parent.append(h("section", { class: "view snap-memory", "aria-label": "Memory per device" }, title, flag, chart));
  return {
    async plot() {
      const { snap, whatif } = at;
      const platform = String(snap.platform).toUpperCase();
      const next = whatif ? whatif.memory : null;
      // a compiled program's snapshot holds its arguments and outputs: the chart is theirs, not XLA's peak
      const program = memoryOf(snap.program) !== null;
      title.textContent = program ? "Arguments and outputs per device" : "Memory per device";
      memoryVerdict(flag, snap.memory, next, platform, program ? "Arguments and outputs (not temporaries: XLA's peak is in the plan above)" : "Captured");
      await host.memoryChart?.(chart, { mem: snap.memory, next, platform, hostOf: hostsOf(snap), dark: host.dark() });
      host.mark("plottedAt");
    },
  };
}

/**
 * The card "What-if": the leaves with Flax logical axis names laid out again under other rules (the dashboard
 * only); `refresh` redraws what the what-if changes.
 * @param {HTMLElement} parent
 * @param {import("../hosts/host.js").Host} host
 * @param {Opened} at
 * @param {() => Promise<void>} refresh
 */
function mountWhatif(parent, host, at, refresh) {
  const rules = h("textarea", { rows: 4, part: "rules", spellcheck: "false", "aria-label": "Rules", placeholder: "('batch', 'data'), ('hidden', 'model'), ('embed', None)" });
  const applyRules = h("button", { type: "button", part: "apply-rules" }, "Apply rules");
  const resetRules = h("button", { type: "button", part: "reset-rules" }, "Back to captured");
  const status = h("span", { class: "muted", role: "status", part: "whatif-status" });
  const error = errorBox("whatif-error");
  const box = h("section", { class: "view snap-whatif", "aria-label": "What-if" },
    h("h2", {}, "What-if: logical → mesh rules"),
    h("p", { class: "muted" }, "Leaves with Flax logical axis names are re-laid out under these rules, as ", h("code", {}, "flax.linen.logical_to_mesh_axes"),
      " would (in order of precedence; a mesh axis is used once per array)."),
    h("span", { class: "field-title" }, "Rules"), rules,
    h("div", { class: "toolbar" }, applyRules, resetRules, status), error);
  box.hidden = !host.data.whatif;
  parent.append(box);

  function defaultRules() {
    const snap = at.snap;
    if (snap.rules) return rulesText(snap.rules);
    const withRules = snap.leaves.find((/** @type {any} */ l) => l.rules);
    return withRules ? rulesText(withRules.rules) : "";
  }

  /** @param {string} text @param {boolean} push */
  async function run(text, push) {
    const state = at.state;
    showError(error, null);
    if (!text.trim()) {
      at.whatif = null;
      state.rules = "";
      if (push) at.save(false);
      status.textContent = "";
      return refresh();
    }
    let parsed;
    try {
      parsed = parseRules(text);
    } catch (e) {
      showError(error, e);
      return;
    }
    const ask = host.data.whatif;
    if (!ask) return;
    status.textContent = "computing…";
    try {
      const res = await ask(snapshotRef(state), parsed);
      at.whatif = whatIfOf(res);
      state.rules = text;
      if (push) at.save(false);
      status.textContent = `${res.leaves.length} logically named leaves: ${res.changed} change, ${res.errors} cannot be laid out`;
      host.bump("whatif");
    } catch (e) {
      status.textContent = "";
      showError(error, e);
      return;
    }
    return refresh();
  }

  applyRules.addEventListener("click", () => run(rules.value, true));
  resetRules.addEventListener("click", () => {
    rules.value = defaultRules();
    run("", true);
  });
  return {
    run,
    /** The rules field: the state's rules, else the snapshot's own. */
    restore() {
      rules.value = at.state.rules || defaultRules();
    },
  };
}

/**
 * The card "Diff": this snapshot against another (a link, an id) or another process of its run (the dashboard
 * only); a changed leaf's path opens it.
 * @param {HTMLElement} parent
 * @param {import("../hosts/host.js").Host} host
 * @param {Opened} at
 * @param {(i: number, push: boolean) => void} selectLeaf
 */
function mountDiff(parent, host, at, selectLeaf) {
  const diffWith = h("input", { type: "text", part: "diff-with", spellcheck: "false", autocomplete: "off", placeholder: "a share link, a snapshot id, or process 1" });
  const diffProcess = h("select", { part: "diff-process" });
  const processField = h("label", { part: "diff-process-field", hidden: true }, "or a process ", diffProcess);
  const diffRun = h("button", { type: "button", part: "diff-run" }, "Compare");
  const diffClear = h("button", { type: "button", part: "diff-clear" }, "Clear");
  const status = h("span", { class: "muted", role: "status", part: "diff-status" });
  const error = errorBox("diff-error");
  const result = h("div", { class: "table-wrap diff-result", part: "diff-result" });
  const box = h("section", { class: "view snap-diff", "aria-label": "Diff" },
    h("h2", {}, "Diff"),
    h("div", { class: "row" }, h("label", {}, "Compare with ", diffWith), processField),
    h("div", { class: "toolbar" }, diffRun, diffClear, status), error, result);
  box.hidden = !host.data.diff;
  parent.append(box);

  /** @param {string} text @param {boolean} push */
  async function run(text, push) {
    const state = at.state;
    showError(error, null);
    if (!text.trim()) {
      result.replaceChildren();
      state.diff = "";
      if (push) at.save(false);
      return;
    }
    const ask = host.data.diff;
    if (!ask) return;
    status.textContent = "comparing…";
    try {
      const res = await ask(snapshotRef(state), await otherRef(text, state, host.data));
      state.diff = text.trim();
      if (push) at.save(false);
      const s = res.summary;
      status.textContent = "";
      const { table, body } = headedTable("procs diff", ["path", "status", "here", "there", "bytes to move"]);
      for (const r of res.leaves.slice(0, 2000)) {
        const b = h("button", { type: "button", class: "link" }, r.path);
        b.addEventListener("click", () => {
          const i = at.snap.leaves.findIndex((/** @type {any} */ l) => l.path === r.path);
          if (i >= 0) selectLeaf(i, true);
        });
        body.insertRow().append(h("td", {}, b), el("td", r.status, r.status), el("td", "mono", r.a_spec || "—"), el("td", "mono", r.b_spec || "—"), el("td", "num", fmtBytes(r.bytes_to_move)));
      }
      result.replaceChildren(
        el("p", "diff-summary", `${s.changed} changed, ${s.added} added, ${s.removed} removed, ${s.same} the same; ${fmtBytes(s.bytes_to_move)} would move (bytes each device must receive).`),
        table,
      );
      host.bump("diffs");
    } catch (e) {
      status.textContent = "";
      showError(error, e);
    }
  }

  diffRun.addEventListener("click", () => run(diffWith.value || (diffProcess.value ? `process ${diffProcess.value}` : ""), true));
  diffClear.addEventListener("click", () => {
    diffWith.value = "";
    run("", true);
  });
  return {
    /** The state's diff, run again (an address that carries one). */
    async restore() {
      diffWith.value = at.state.diff;
      await run(at.state.diff, false);
    },
    /** A run's reported processes, offered to compare with. @param {any} runInfo */
    processes(runInfo) {
      diffProcess.replaceChildren(option("—", ""), ...runInfo.reported.map((/** @type {number} */ p) => option(`process ${p}`, String(p))));
      processField.hidden = false;
    },
  };
}

/**
 * The panel, built from the cards above in reading order: a plan or a capture of a program leads with its
 * verdict and its collectives; the leaves follow, then memory, the what-if and the diff. The opening of a
 * snapshot and the order its cards are drawn in are here.
 * @param {HTMLElement} root
 * @param {import("../hosts/host.js").Host} host
 * @param {SState} initial
 */
export function mount(root, host, initial) {
  const data = host.data;
  /** @type {Opened} */
  const at = {
    state: { ...fromQuery(new URLSearchParams()), ...initial },
    snap: null,
    whatif: null,
    save: (replace) => host.save({ ...at.state }, replace),
  };
  /** How many times the panel was opened (a snapshot drawn in pieces stops when another opens). */
  let opened = 0;
  const life = lifetime();

  root.classList.add("snap-app");
  root.replaceChildren();
  const head = mountHead(root, host, at);
  const search = mountSearch(root, host, at);
  const findings = mountFindingsOrValues(root, "findings", at);
  const plan = mountPlan(root, host, at);
  const collectives = mountCollectives(root, host, at);
  const values = mountFindingsOrValues(root, "values", at);
  const leaves = mountLeaves(root, host, at);
  const memory = mountMemory(root, host, at);
  const refreshAll = () => {
    leaves.filter();
    leaves.renderLeaf();
    return memory.plot();
  };
  const whatif = mountWhatif(root, host, at, refreshAll);
  const diff = mountDiff(root, host, at, leaves.select);

  /**
   * Draws the snapshot in the order a reader looks at it, each piece after the previous one is on screen: the
   * head and a plan's verdict first (from the snapshot alone), then the collectives and the chosen one's why,
   * then the leaves and a leaf's layout, then memory (Plotly's chart last, loaded only then).
   * @param {number} turn this opening's number: a newer opening stops it
   */
  async function start(turn) {
    if (!at.snap) {
      head.showEmpty(root, true);
      return;
    }
    root.classList.remove("no-snapshot");
    head.render(diff.processes);
    search.render();
    findings.render();
    plan.render();
    leaves.axes();
    const current = async () => {
      await afterPaint();
      return turn === opened && !life.disposed;
    };
    if (!(await current())) return;
    head.remember();
    collectives.render();
    values.render();
    if (!(await current())) return;
    leaves.build();
    whatif.restore();
    if (at.state.rules) await whatif.run(at.state.rules, false);
    else {
      leaves.filter();
      if (!(await current())) return;
      leaves.renderLeaf();
      if (!(await current())) return;
      await memory.plot();
    }
    if (turn !== opened || life.disposed) return;
    host.bump("rendered");
    if (at.state.diff) await diff.restore();
  }

  /** (Re)opens the panel at `next`: on arrival, and after back or forward. @param {SState} next */
  async function open(next) {
    const turn = ++opened;
    showError(head.error, null);
    at.state = { ...fromQuery(new URLSearchParams()), ...next };
    at.snap = null;
    at.whatif = null;
    leaves.reset();
    collectives.reset();
    try {
      if ((at.state.snapshot || at.state.run) && data.snapshot) at.snap = await data.snapshot(snapshotRef(at.state));
      if (life.disposed || turn !== opened) return;
      await start(turn);
    } catch (e) {
      showError(head.error, e);
      head.showEmpty(root, false);
    }
    host.bump("loaded");
  }

  life.add(leaves.dispose);
  life.add(host.onTheme(() => {
    if (!at.snap) return;
    search.render();
    findings.render();
    plan.render();
    collectives.render();
    values.render();
    refreshAll();
  }));
  open(at.state);

  return {
    update: (next) => open(next),
    dispose: life.dispose,
  };
}
