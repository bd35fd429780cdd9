/** Calls waiting for a slot, per slot: a burst of distinct usernames waits, a stalled upstream does not pile up. */
const QUEUE_PER_SLOT = 8

export interface ConcurrencyLimiterOptions {
  /** Slots: calls in flight at once; QUEUE_PER_SLOT per slot may wait, past it `full`. */
  concurrency: number
}

/**
 * At most `concurrency` holders at once, the next ones in a bounded FIFO queue. A waiter whose signal aborts leaves
 * the queue at once, rejected with the signal's reason: nobody waits for it any more, so it must neither hold its
 * caller nor take a slot later. Each slot taken is given back once, with `leave`.
 */
export class ConcurrencyLimiter {
  readonly #concurrency: number
  readonly #queueLimit: number
  readonly #waiting: Array<() => void> = []
  #running = 0

  constructor (options: ConcurrencyLimiterOptions) {
    this.#concurrency = options.concurrency
    this.#queueLimit = options.concurrency * QUEUE_PER_SLOT
  }

  /** Slots held (read at scrape time: pbff_upstream_calls_in_flight). */
  get running (): number {
    return this.#running
  }

  /** Waiters (pbff_upstream_calls_queued). */
  get queued (): number {
    return this.#waiting.length
  }

  /** Whether one more waiter would exceed the queue. */
  get full (): boolean {
    return this.#waiting.length >= this.#queueLimit
  }

  /** Takes a free slot, if there is one. */
  tryEnter (): boolean {
    if (this.#running >= this.#concurrency) return false
    this.#running++
    return true
  }

  /** Waits in the queue (check `full` first) until a slot is handed over, or `signal` aborts. */
  async enter (signal: AbortSignal): Promise<void> {
    signal.throwIfAborted()
    // The slot is handed over by `leave`, so `running` never drops and rises again in between.
    await new Promise<void>((resolve, reject) => {
      const start = (): void => { signal.removeEventListener('abort', quit); resolve() }
      const quit = (): void => {
        this.#waiting.splice(this.#waiting.indexOf(start), 1)
        reject(signal.reason)
      }
      signal.addEventListener('abort', quit, { once: true })
      this.#waiting.push(start)
    })
  }

  leave (): void {
    const next = this.#waiting.shift()
    if (next === undefined) this.#running--
    else next()
  }
}
