export interface ClientOptions {
  /** Where the service answers, e.g. `https://profiles.example` (a path prefix is kept). */
  baseUrl: string
  /** Default: the global fetch (browsers, Node 18+). */
  fetch?: typeof fetch
  /** Versions kept for ETag revalidation (the least recently used go first); 0 turns revalidation off. An integer, 0 or more. */
  maxHeld?: number
  /** Each call's bound, in ms: past it the call rejects with a `TimeoutError` DOMException. Default: none. */
  timeoutMs?: number
}

/** Throws a TypeError naming the option: a NaN or an Infinity (a setting that did not parse) would silently remove its bound. */
export function assertValidOptions ({ maxHeld, timeoutMs }: ClientOptions): void {
  if (maxHeld !== undefined && !(Number.isSafeInteger(maxHeld) && maxHeld >= 0)) {
    throw new TypeError(`maxHeld must be an integer, 0 or more (got ${String(maxHeld)})`)
  }
  if (timeoutMs !== undefined && !(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new TypeError(`timeoutMs must be a finite number of ms above 0 (got ${String(timeoutMs)})`)
  }
}
