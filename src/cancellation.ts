/**
 * How a wait ends early, decided here only. A caller's connection closing, or every caller of a shared
 * load leaving, aborts with an `AbortError`; a deadline (AbortSignal.timeout) with a `TimeoutError`.
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

/** `signal` (the caller's, or a shared load's) combined once with a deadline `ms` from now (none left: at once). */
export function withDeadline (signal: AbortSignal | undefined, ms: number): AbortSignal {
  const deadline = AbortSignal.timeout(Math.max(0, Math.floor(ms)))
  return signal === undefined ? deadline : AbortSignal.any([signal, deadline])
}

/**
 * `promise`, or the signal's reason as soon as it aborts: the caller stops waiting, while what `promise`
 * stands for goes on (it may be shared with others, and says itself when it is done).
 */
export async function untilAborted<T> (promise: Promise<T>, signal: AbortSignal): Promise<T> {
  signal.throwIfAborted()
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
