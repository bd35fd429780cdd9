/** The share of this instance's rate that refresh-ahead may take ahead of callers (docs/upstream-budget.md, "The reserve"). */
const RESERVE_SHARE = 0.1
/**
 * Unused, the reserve accrues this long of its rate at most (and always one call), so that hot entries filled together
 * (and so due together, a tenth of their freshness before it ends) can all be refreshed ahead.
 */
const DEPTH_MS = 5_000

/**
 * Refresh-ahead's reserve on one instance: a right of way over waiting callers, for at most RESERVE_SHARE of the rate
 * in force. Nothing is set aside: a call the reserve does not claim goes to the next caller as it comes, so callers
 * lose only the calls hot entries take, at most a tenth. It starts empty and fills at its rate.
 */
export class Reserve {
  #level = 0
  #at: number

  constructor (now: number) {
    this.#at = now
  }

  /** Whether a refresh-ahead call may go ahead of callers at `now`, this instance's rate being `rps`. */
  available (rps: number, now: number): boolean {
    const reserveRps = rps * RESERVE_SHARE
    this.#level = Math.min(Math.max(1, reserveRps * DEPTH_MS / 1000), this.#level + reserveRps * Math.max(0, now - this.#at) / 1000)
    this.#at = Math.max(this.#at, now)
    return this.#level >= 1
  }

  /** One call went ahead of callers. */
  take (): void {
    this.#level -= 1
  }

  /** How long until the reserve has a call, at `rps`, as `available` last saw it; Infinity while it has one (nothing to wait for). */
  nextInMs (rps: number): number {
    return this.#level >= 1 ? Infinity : Math.max(1, Math.ceil((1 - this.#level) * 1000 / (rps * RESERVE_SHARE)))
  }
}
