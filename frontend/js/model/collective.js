// One collective as every view reads it, from a kernel run (`collectives`, `tpu.collectives`) or a
// snapshot's inspect_jit capture: how its device groups read as text, and the groups the topology
// view should draw — a collective-permute's source → target pairs as groups of two.

import { groupText, groupsQuery } from "../lib/format.js";

/**
 * @typedef {{op: string, shape: string, bytes: number | null, groups: number[][] | null,
 *   pairs?: number[][] | null, is_async?: boolean, axes?: string[], exact_axes?: boolean,
 *   axes_text?: string, replica_groups?: string, source?: string, raw?: string | null}} Collective
 */

/** The op, "(async)" when it is. @param {Collective} c @returns {string} */
export function opText(c) {
  return c.op + (c.is_async ? " (async)" : "");
}

/** Its device groups ("{0,4} {1,5}"), else its pairs ("0→4 4→0"), else the HLO text. @param {Collective} c */
export function groupsText(c) {
  if (c.groups && c.groups.length) return c.groups.map(groupText).join(" ");
  if (c.pairs && c.pairs.length) return pairsText(c.pairs);
  return c.raw || c.replica_groups || "—";
}

/** "source → target: 0→4 4→0". @param {number[][]} pairs @returns {string} */
function pairsText(pairs) {
  return pairs.map(([a, b]) => `${a}→${b}`).join(" ");
}

/** The longer form for a hover title. @param {Collective} c @returns {string} */
export function groupsTitle(c) {
  return c.pairs && c.pairs.length ? `source → target: ${pairsText(c.pairs)}` : c.replica_groups || c.raw || "";
}

/**
 * How many groups and how big, for captions: "4 groups of 2", "8 source → target pairs".
 * @param {Collective} c
 * @returns {string}
 */
export function groupsSummary(c) {
  if (c.pairs && c.pairs.length) return `${c.pairs.length} source → target pair${c.pairs.length === 1 ? "" : "s"}`;
  const g = c.groups || [];
  return `${g.length} group${g.length === 1 ? "" : "s"} of ${g[0]?.length ?? 0}`;
}

/**
 * What the topology view measures for this collective: for a collective-permute each source → target
 * pair as a group of two (the hop is the distance the data travels), else its replica groups. Null
 * when they cannot go: none, of unequal sizes (POST /api/topology/groups takes equal-sized groups),
 * or more than `maxIds` device ids in all (a URL's worth).
 * @param {Collective} c
 * @param {number} [maxIds]
 * @returns {{groups: number[][], label: string} | null}
 */
export function topologyGroups(c, maxIds = 4096) {
  const over = c.axes_text ? ` over ${c.axes_text}` : "";
  if (c.pairs && c.pairs.length) {
    return c.pairs.length * 2 <= maxIds ? { groups: c.pairs, label: `${c.op}${over}, source → target` } : null;
  }
  const g = c.groups;
  if (!g || !g.length || !g.every((x) => x.length === g[0].length)) return null;
  if (g.length * g[0].length > maxIds) return null;
  return { groups: g, label: `${c.op}${over}` };
}

/**
 * The topology view's state for collective `c`: `base` (a device set, the mesh the collective ran on, a
 * layout to colour by: model/state.js's State) with the collective's groups to draw and measure (a
 * collective-permute's source → target pairs as groups of two), or — for groups that cannot be handed
 * over — its mesh axis when it runs along exactly one whole axis of the mesh; else `base` as it is.
 * @template {{axes: string}} S
 * @param {S} base
 * @param {Collective} c
 * @returns {S & {groups?: string, glabel?: string, axis?: string}}
 */
export function onTopology(base, c) {
  const handed = topologyGroups(c);
  if (handed) return { ...base, groups: groupsQuery(handed.groups), glabel: handed.label };
  const names = base.axes.split(",").map((a) => a.trim());
  if (c.exact_axes && c.axes && c.axes.length === 1 && names.includes(c.axes[0])) return { ...base, axis: c.axes[0] };
  return base;
}
