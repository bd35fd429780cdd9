import type { Schedule } from './budget/schedule.ts'
import { EXCHANGE_DEADLINE_MS } from './token-timing.ts'

/**
 * The identity provider's deadline for one exchange: EXCHANGE_DEADLINE_MS from when it is asked, none before (the
 * store's steps are bounded by Redis's own, so that a slow Redis costs time, never the exchange) nor once it answered;
 * then, past it, the end of its lingering (`linger`).
 */
export class ExchangeDeadline {
  readonly #now: () => number
  readonly #schedule: Schedule
  readonly #overdue: () => void
  #at = Infinity
  #cancel = (): void => {}

  /** `overdue` runs when the deadline passes unanswered (a caller may notice it sooner, through `passed`). */
  constructor (now: () => number, schedule: Schedule, overdue: () => void) {
    this.#now = now
    this.#schedule = schedule
    this.#overdue = overdue
  }

  get at (): number {
    return this.#at
  }

  get passed (): boolean {
    return this.#now() >= this.#at
  }

  /** The provider is asked now. */
  start (): void {
    this.#arm(EXCHANGE_DEADLINE_MS)
  }

  /** Past the deadline, the provider's answer is still taken for `ms` more (until the retry is due); `overdue` runs again then. */
  linger (ms: number): void {
    this.#cancel()
    this.#arm(ms)
  }

  /** The provider answered, or the exchange ended. */
  stop (): void {
    this.#cancel()
    this.#at = Infinity
  }

  #arm (ms: number): void {
    this.#at = this.#now() + ms
    // Past the deadline, the answer may already wait in its socket behind a late timer: read it first (the poll phase comes before setImmediate's).
    this.#cancel = this.#schedule(ms, () => { setImmediate(this.#overdue) })
  }
}
