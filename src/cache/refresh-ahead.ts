import type { CacheEntry } from './cache-entry.ts'

export interface RefreshAheadOptions {
  /** Hits in the last part of an entry's freshness that make it hot. */
  hits?: number
  /** That last part, as a share of the entry's freshness... */
  shareOfFreshness?: number
  /** ...and at least this long. */
  minWindowMs?: number
}

const HOT_HITS = 5
const LAST_SHARE = 0.1
const MIN_WINDOW_MS = 5_000

/**
 * Which hits should refresh their entry ahead of time: an entry asked for HOT_HITS times in the last tenth of its
 * freshness (at least 5 s) is refreshed then, so that a hot profile is never served stale nor costs a caller a miss.
 * The refresh asks as class `refresh-ahead`: the budget's reserve for it (a tenth of the rate), else spare budget
 * only; if none was to be had, every HOT_HITS more hits ask again. Counted per entry version, in a WeakMap: what is no longer held is forgotten with it.
 */
export class RefreshAhead {
  readonly #hits = new WeakMap<CacheEntry, number>()
  readonly #hot: number
  readonly #share: number
  readonly #minWindowMs: number

  constructor ({ hits = HOT_HITS, shareOfFreshness = LAST_SHARE, minWindowMs = MIN_WINDOW_MS }: RefreshAheadOptions = {}) {
    this.#hot = hits
    this.#share = shareOfFreshness
    this.#minWindowMs = minWindowMs
  }

  /** Counts a hit on a fresh `entry`; true when it is time to refresh it. */
  due (entry: CacheEntry, now: number): boolean {
    const windowMs = Math.max(this.#minWindowMs, (entry.freshUntil - entry.storedAt) * this.#share)
    if (entry.freshUntil - now > windowMs) return false
    const hits = (this.#hits.get(entry) ?? 0) + 1
    this.#hits.set(entry, hits)
    return hits % this.#hot === 0
  }
}
