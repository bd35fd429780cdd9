import { UPSTREAM_OVERLOADED } from '../errors.ts'

/** Calls waiting for a slot, per slot: a burst of distinct usernames waits, a stalled upstream does not pile up. */
const QUEUE_PER_SLOT = 8

export interface ConcurrencyLimiterOptions {
  /** Tasks running at once. */
  concurrency: number
  /** Tasks waiting for a slot (default QUEUE_PER_SLOT per slot); one more is refused with UPSTREAM_OVERLOADED. */
  queueLimit?: number
}

/**
 * At most `concurrency` tasks at once, the next ones in a bounded FIFO queue. A full queue refuses
 * at once (503) rather than holding callers and memory without bound while the upstream is slow.
 * A waiter whose signal aborts leaves the queue at once, rejected with the signal's reason: nobody
 * waits for it any more, so it must neither hold its caller nor take a slot later.
 */
export class ConcurrencyLimiter {
  readonly #options: ConcurrencyLimiterOptions
  readonly #queueLimit: number
  readonly #waiting: Array<() => void> = []
  #running = 0

  constructor (options: ConcurrencyLimiterOptions) {
    this.#options = options
    this.#queueLimit = options.queueLimit ?? options.concurrency * QUEUE_PER_SLOT
  }

  get running (): number {
    return this.#running
  }

  get queued (): number {
    return this.#waiting.length
  }

  async run<T> (task: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    await this.#acquire(signal)
    try {
      return await task()
    } finally {
      this.#release()
    }
  }

  async #acquire (signal: AbortSignal | undefined): Promise<void> {
    signal?.throwIfAborted()
    if (this.#running < this.#options.concurrency) {
      this.#running++
      return
    }
    if (this.#waiting.length >= this.#queueLimit) throw new UPSTREAM_OVERLOADED()
    // The slot is handed over by #release, so `running` never drops and rises again in between.
    await new Promise<void>((resolve, reject) => {
      const start = (): void => { signal?.removeEventListener('abort', leave); resolve() }
      const leave = (): void => {
        this.#waiting.splice(this.#waiting.indexOf(start), 1)
        reject(signal?.reason)
      }
      signal?.addEventListener('abort', leave, { once: true })
      this.#waiting.push(start)
    })
  }

  #release (): void {
    const next = this.#waiting.shift()
    if (next === undefined) this.#running--
    else next()
  }
}
