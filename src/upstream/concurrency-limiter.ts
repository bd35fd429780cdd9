import { UPSTREAM_OVERLOADED } from '../errors.js'

export interface ConcurrencyLimiterOptions {
  /** Tasks running at once. */
  concurrency: number
  /** Tasks waiting for a slot; one more is refused with UPSTREAM_OVERLOADED. */
  queueLimit: number
}

/**
 * At most `concurrency` tasks at once, the next ones in a bounded FIFO queue. A full queue refuses
 * at once (503) rather than holding callers and memory without bound while the upstream is slow.
 */
export class ConcurrencyLimiter {
  readonly #options: ConcurrencyLimiterOptions
  readonly #waiting: Array<() => void> = []
  #running = 0

  constructor (options: ConcurrencyLimiterOptions) {
    this.#options = options
  }

  get running (): number {
    return this.#running
  }

  get queued (): number {
    return this.#waiting.length
  }

  async run<T> (task: () => Promise<T>): Promise<T> {
    await this.#acquire()
    try {
      return await task()
    } finally {
      this.#release()
    }
  }

  async #acquire (): Promise<void> {
    if (this.#running < this.#options.concurrency) {
      this.#running++
      return
    }
    if (this.#waiting.length >= this.#options.queueLimit) throw new UPSTREAM_OVERLOADED()
    // The slot is handed over by #release, so `running` never drops and rises again in between.
    await new Promise<void>((resolve) => this.#waiting.push(resolve))
  }

  #release (): void {
    const next = this.#waiting.shift()
    if (next === undefined) this.#running--
    else next()
  }
}
