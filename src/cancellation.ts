/**
 * How a wait ends early, decided here only. A caller's connection closing, or every caller of a shared
 * load leaving, aborts with an `AbortError`; a deadline (withDeadline) with a `TimeoutError`.
 */

/** The reason a signal aborts with when nobody waits for the answer any more. */
export function nobodyWaits (why: string): DOMException {
  return new DOMException(why, 'AbortError')
}

/** Whether `reason` says that nobody waits any more (not a deadline). */
export function isCancellation (reason: unknown): boolean {
  return reason instanceof DOMException && reason.name === 'AbortError'
}

/** Whether `reason` says that a deadline passed. */
export function isDeadline (reason: unknown): boolean {
  return reason instanceof DOMException && reason.name === 'TimeoutError'
}

/** A signal bounded by a deadline, and how to let go of it once the work it bounds is done. */
export interface Deadline {
  readonly signal: AbortSignal
  /** The work is done: its timer and its link to the outer signal go now, not when the timer would have fired. */
  clear: () => void
}

/**
 * `signal` (the caller's, or a shared load's) combined once with a deadline `ms` from now (none left: at once). Not
 * AbortSignal.timeout and AbortSignal.any: a timeout signal with listeners is kept alive, and every closure its
 * listeners hold with it, until its timer fires, however soon the work ended (2 KB a call for UPSTREAM_TIMEOUT_MS:
 * a storm of refused misses spent an eighth of its CPU profile in GC; docs/performance-history.md).
 */
export function withDeadline (signal: AbortSignal | undefined, ms: number): Deadline {
  const controller = new AbortController()
  const follow = (): void => { controller.abort(signal?.reason) }
  const timer = setTimeout(() => { controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')) }, Math.max(0, Math.floor(ms)))
  // Like AbortSignal.timeout's, it keeps no process alive.
  timer.unref()
  const clear = (): void => {
    clearTimeout(timer)
    signal?.removeEventListener('abort', follow)
  }
  controller.signal.addEventListener('abort', clear, { once: true })
  if (signal?.aborted === true) follow()
  else signal?.addEventListener('abort', follow, { once: true })
  return { signal: controller.signal, clear }
}

/**
 * `promise`, or the signal's reason as soon as it aborts: the caller stops waiting, while what `promise`
 * stands for goes on (it may be shared with others, and says itself when it is done).
 */
export async function untilAborted<T> (promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    // Nobody reads it now: should it fail later, that is no unhandled rejection (which would end the process).
    promise.catch(() => {})
    throw signal.reason
  }
  let leave = (): void => {}
  const aborted = new Promise<never>((_resolve, reject) => {
    leave = () => reject(signal.reason)
    signal.addEventListener('abort', leave, { once: true })
  })
  try {
    return await Promise.race([promise, aborted])
  } finally {
    signal.removeEventListener('abort', leave)
  }
}
