import type { RefusalReason } from '../errors.ts'

/** At most one summary line this often: refusals come by the thousand a second when they come. */
const SUMMARY_INTERVAL_MS = 1_000

export type RefusalCounts = Partial<Record<RefusalReason, number>>

export interface RefusalSummaryOptions {
  now: () => number
  /** Writes one summary line (at warn). */
  write: (refusals: RefusalCounts) => void
}

/**
 * Sums up the callers refused at once, instead of a log line each: the first refusal after a quiet second is written at
 * once with those still unwritten; the others wait for the next line, a second or more later, or `flush` (at close).
 */
export class RefusalSummary {
  readonly #options: RefusalSummaryOptions
  #pending: RefusalCounts = {}
  #any = false
  #writtenAt = -Infinity

  constructor (options: RefusalSummaryOptions) {
    this.#options = options
  }

  count (reason: RefusalReason): void {
    this.#pending[reason] = (this.#pending[reason] ?? 0) + 1
    this.#any = true
    if (this.#options.now() - this.#writtenAt >= SUMMARY_INTERVAL_MS) this.flush()
  }

  flush (): void {
    if (!this.#any) return
    this.#options.write(this.#pending)
    this.#pending = {}
    this.#any = false
    this.#writtenAt = this.#options.now()
  }
}
