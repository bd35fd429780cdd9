import type { BreakerState, Telemetry } from '../telemetry/telemetry.ts'
import { steadyNow } from '../steady-clock.ts'

/** Failures in a row that open the circuit, and how long it stays open before a probe: one call a second in an outage. */
export const BREAKER_FAILURE_THRESHOLD = 5
export const BREAKER_OPEN_MS = 1_000

export interface CircuitBreakerOptions {
  telemetry: Pick<Telemetry, 'breaker'>
  now?: () => number
}

/** What `tryAcquire` lets through: an ordinary call, or the one probe of a half-open circuit. */
export type Permit = 'call' | 'probe'

/**
 * Stops calling an upstream that keeps failing. Closed: calls go through, and BREAKER_FAILURE_THRESHOLD
 * failures in a row open it. Open: every call is refused at once for BREAKER_OPEN_MS. Then half open: exactly
 * one call (the probe) goes through; its success closes the circuit, its failure opens it again.
 * Per instance: each instance learns about the upstream from its own calls.
 */
export class CircuitBreaker {
  readonly #options: CircuitBreakerOptions
  readonly #now: () => number
  #state: BreakerState = 'closed'
  #failures = 0
  #openedAt = 0
  #probing = false

  constructor (options: CircuitBreakerOptions) {
    this.#options = options
    this.#now = options.now ?? steadyNow
  }

  get state (): BreakerState {
    if (this.#state === 'open' && this.#now() - this.#openedAt >= BREAKER_OPEN_MS) this.#moveTo('half_open')
    return this.#state
  }

  /** Milliseconds until a probe may go through (0 unless open). */
  get retryInMs (): number {
    return this.state === 'open' ? this.#openedAt + BREAKER_OPEN_MS - this.#now() : 0
  }

  /** May a call go through now? In half open, once: that caller is the probe. Each permit is reported back once. */
  tryAcquire (): Permit | undefined {
    const state = this.state
    if (state === 'closed') return 'call'
    if (state === 'open' || this.#probing) return undefined
    this.#probing = true
    return 'probe'
  }

  /** The verdict on a call `permit` let through: did the upstream fail? */
  record (permit: Permit, failed: boolean): void {
    // Only the probe ends the probe: a call let through before the circuit opened may end while it runs.
    if (permit === 'probe') this.#probing = false
    if (!failed) {
      this.#failures = 0
      if (this.#state !== 'closed') this.#moveTo('closed')
      return
    }
    this.#failures++
    if (this.#state === 'half_open' || this.#failures >= BREAKER_FAILURE_THRESHOLD) {
      this.#openedAt = this.#now()
      this.#moveTo('open')
    }
  }

  /** A call `permit` let through ended without a verdict (it was cancelled): a probe's turn is given back, nothing is learnt. */
  abstain (permit: Permit): void {
    if (permit === 'probe') this.#probing = false
  }

  #moveTo (state: BreakerState): void {
    this.#state = state
    this.#options.telemetry.breaker(state)
  }
}
