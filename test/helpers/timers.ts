import type { Schedule } from '../../src/upstream/budget/schedule.ts'
import { settle, type Clock } from './clock.ts'

/**
 * The gates' timers on the test's clock: `advance` moves it, firing each timer when its time comes, and after each
 * lets what the timers started (leases sent to Redis, say) come back (a real round trip) before time moves on.
 */
export class Timers {
  readonly #clock: Clock
  readonly #entries: Array<{ at: number, run: () => void }> = []
  readonly #pending = new Set<Promise<unknown>>()

  constructor (clock: Clock) {
    this.#clock = clock
  }

  readonly schedule: Schedule = (ms, run) => {
    const entry = { at: this.#clock.now() + ms, run }
    this.#entries.push(entry)
    return () => {
      const index = this.#entries.indexOf(entry)
      if (index !== -1) this.#entries.splice(index, 1)
    }
  }

  track<T> (promise: Promise<T>): Promise<T> {
    this.#pending.add(promise)
    promise.finally(() => this.#pending.delete(promise)).catch(() => {})
    return promise
  }

  /** Until no lease is on its way and every callback has run. */
  async idle (): Promise<void> {
    do {
      await settle()
      await Promise.allSettled([...this.#pending])
      await settle()
    } while (this.#pending.size > 0)
  }

  async advance (ms: number): Promise<void> {
    const end = this.#clock.now() + ms
    await this.idle()
    for (;;) {
      const next = this.#entries.filter((entry) => entry.at <= end).sort((a, b) => a.at - b.at)[0]
      if (next === undefined) break
      this.#entries.splice(this.#entries.indexOf(next), 1)
      this.#clock.advance(Math.max(0, next.at - this.#clock.now()))
      next.run()
      await this.idle()
    }
    // What ran may have moved the clock past the end (a Redis that answers late): time never goes back.
    this.#clock.advance(Math.max(0, end - this.#clock.now()))
    await this.idle()
  }
}
