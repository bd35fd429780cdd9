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
