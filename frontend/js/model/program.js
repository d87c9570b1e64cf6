// A compiled program's report, read one way everywhere (sharding_core/program/report.py: the `program`
// of kernel results, reshards, inspect_jit captures and plans). Its memory is XLA's memory_analysis by
// XLA's own field names, its work is XLA's cost_analysis beside the loop-corrected counts: no panel
// reads those fields itself, so there is one vocabulary from the compiler to the screen.

/**
 * @typedef {{argument_size_in_bytes?: number, output_size_in_bytes?: number, alias_size_in_bytes?: number,
 *   temp_size_in_bytes?: number, generated_code_size_in_bytes?: number, peak_memory_in_bytes?: number | null}} Memory
 * @typedef {{flops?: number | null, flops_xla?: number | null, bytes_accessed_xla?: number | null,
 *   transcendentals?: number | null}} Work
 * @typedef {{memory?: Memory | null, work?: Work | null, timings?: {lower_seconds?: number, compile_seconds?: number},
 *   compiler_log?: string[], origins?: any, device_assignment?: number[]}} Report
 */

/** The report's memory per device (null: XLA refused the program, or nothing was compiled). @param {Report | null | undefined} report @returns {Memory | null} */
export function memoryOf(report) {
  return report?.memory || null;
}

/** XLA's peak per device (memory_analysis' peak_memory_in_bytes), or null. @param {Report | null | undefined} report @returns {number | null} */
export function peakOf(report) {
  return memoryOf(report)?.peak_memory_in_bytes ?? null;
}

/** The report's work per device (null: refused). @param {Report | null | undefined} report @returns {Work | null} */
export function workOf(report) {
  return report?.work || null;
}

/** The compile's seconds (XLA's, not the lowering's), 0 when not timed. @param {Report | null | undefined} report */
export function compileSeconds(report) {
  return report?.timings?.compile_seconds ?? 0;
}

/** XLA's warnings while compiling. @param {Report | null | undefined} report @returns {string[]} */
export function compilerLog(report) {
  return report?.compiler_log || [];
}
