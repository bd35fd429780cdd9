import { refusal, UPSTREAM_AUTH_FAILED } from '../errors.ts'
import { retryDelay } from './token-timing.ts'

/**
 * The identity provider's failures as one instance knows them: how many exchanges failed in a row (here, or another
 * instance's window in the store), when the next may start, and why the last one failed (for /readyz).
 */
export class TokenFailures {
  readonly #now: () => number
  readonly #random: () => number
  #count = 0
  #retryAt = 0
  #reason: string | undefined

  constructor (now: () => number, random: () => number) {
    this.#now = now
    this.#random = random
  }

  get failing (): boolean {
    return this.#count > 0
  }

  get reason (): string | undefined {
    return this.#reason
  }

  get count (): number {
    return this.#count
  }

  /** Whether the next exchange must wait: the back-off, counted from the last failure. */
  get backingOff (): boolean {
    return this.#retryAt > this.#now()
  }

  /** An exchange failed at `failedAt`: the back-off (in ms) counts from then, `atLeastMs` long if the provider asked it. */
  record (reason: string, failedAt: number, atLeastMs = 0): number {
    this.#count++
    const delayMs = Math.max(retryDelay(this.#random()), atLeastMs)
    this.#retryAt = failedAt + delayMs
    this.#reason = reason
    return delayMs
  }

  /** Another instance found the provider failing, for `failingMs` more (> 0): the refusal of this caller. */
  adopt (failingMs: number): Error {
    this.#count = Math.max(this.#count, 1)
    this.#retryAt = this.#now() + failingMs
    this.#reason = 'another instance found the identity provider failing'
    return backingOff(failingMs)
  }

  clear (): void {
    this.#count = 0
    this.#retryAt = 0
    this.#reason = undefined
  }

  /** How long the back-off still lasts. */
  get remainingMs (): number {
    return Math.max(0, this.#retryAt - this.#now())
  }

  /**
   * The refusal of a caller without a usable token, when known at once: during the back-off, or while a retry runs
   * (only the caller that started it waits for it). Undefined: the caller may wait for, or start, an exchange.
   */
  refusal (retryRunning: boolean): Error | undefined {
    if (!this.refuses(retryRunning)) return undefined
    return retryRunning ? refused('the identity provider is failing; a retry is under way') : backingOff(this.remainingMs)
  }

  /** Whether `refusal` would refuse, making nothing. */
  refuses (retryRunning: boolean): boolean {
    return this.#count > 0 && (retryRunning || this.backingOff)
  }
}

function backingOff (remainingMs: number): Error {
  return refused(`the identity provider is failing; next attempt in ${Math.ceil(remainingMs / 1000)} s`)
}

/** Decided at once, so built without a stack (see `refusal`). */
function refused (why: string): Error {
  return refusal('no-token', () => new UPSTREAM_AUTH_FAILED(why))
}
