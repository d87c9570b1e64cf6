// JSON over fetch (getJSON, postJSON); every error body is {"error": {"code", "message", "hint"?, ...}},
// thrown as an ApiError.

export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {{code: string, message: string, hint?: string, column?: number, axis_types?: string[]}} error
   */
  constructor(status, error) {
    super(error.message);
    this.status = status;
    this.error = error;
  }
}

/** @param {Response} r */
async function decode(r) {
  let body = null;
  try {
    body = await r.json();
  } catch {
    body = null;
  }
  if (!r.ok) {
    const err = body && body.error ? body.error : { code: "http_error", message: `HTTP ${r.status}` };
    throw new ApiError(r.status, err);
  }
  return body;
}

/** @param {string} url @param {AbortSignal} [signal] */
export async function getJSON(url, signal) {
  return decode(await fetch(url, { signal, headers: { Accept: "application/json" } }));
}

/** @param {string} url @param {unknown} payload @param {AbortSignal} [signal] */
export async function postJSON(url, payload, signal) {
  return decode(
    await fetch(url, {
      method: "POST",
      signal,
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(payload),
    }),
  );
}

/** True for the error an aborted fetch throws (a newer request replaced it). @param {unknown} e */
export function isAbort(e) {
  return e instanceof DOMException && e.name === "AbortError";
}

/**
 * A debounced job whose newest run wins: `schedule(delay)` (re)starts the wait, and a run that starts
 * aborts the one in flight (through the signal handed to `work`). Errors other than the abort go to
 * `onError`; `now()` runs at once; `stop()` cancels the wait and aborts what is in flight (a panel going away).
 * @param {(signal: AbortSignal) => Promise<void>} work
 * @param {(e: unknown) => void} onError
 * @returns {{schedule: (delay: number) => void, now: () => void, stop: () => void}} delay in ms
 */
export function newestWins(work, onError) {
  /** @type {AbortController | null} */
  let inflight = null;
  let timer = 0;
  const run = async () => {
    inflight?.abort();
    const ctrl = new AbortController();
    inflight = ctrl;
    try {
      await work(ctrl.signal);
    } catch (e) {
      if (!isAbort(e) && !ctrl.signal.aborted) onError(e);
    } finally {
      if (inflight === ctrl) inflight = null;
    }
  };
  return {
    schedule(delay) {
      clearTimeout(timer);
      timer = window.setTimeout(run, delay);
    },
    /** Runs now, in this task (a page's first request: not after a timer and a frame). */
    now() {
      clearTimeout(timer);
      run();
    },
    stop() {
      clearTimeout(timer);
      inflight?.abort();
    },
  };
}
