// JSON over fetch; every error body is {"error": {"code", "message", "hint"?, ...}}.

export class ApiError extends Error {
  /** @param {number} status @param {{code: string, message: string, hint?: string, column?: number}} error */
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
