import type { CacheEntry } from './cache-entry.ts'

/** Hits that make an entry hot, counted from half its configured freshness. */
const HOT_HITS = 5
/** Hits count from here: an entry hot in the second half of its freshness is refreshed at its first hit from nine tenths. */
const HOT_FROM_SHARE = 0.5
/** Refresh-ahead waits for nine tenths of the configured freshness, so a hot key costs at most one call per nine tenths of it. */
const LEAD_START_SHARE = 0.9
/** Counted once refreshed, so that a version is refreshed ahead once. */
const REFRESHED = -1

/**
 * Which hit should refresh its entry ahead of time: the first from nine tenths of the *configured* freshness after the
 * entry was stored, once HOT_HITS hits (this one included) came from half of it on, so that a hot profile is never
 * served stale nor costs a caller a miss. The window from nine tenths to the entry's end is what jitter left of the last
 * tenth (from nothing to a tenth of it): counting hits only there, a hot entry at 20 s went stale before its fifth hit
 * most of the time. The configured freshness, not the entry's own: jitter shortens that by up to a tenth, and nine
 * tenths of it would replace a version 0.81 of the freshness after it was stored; an entry jitter left shorter than nine
 * tenths is not refreshed ahead, the stale path (from its end, at nine tenths or later) refreshes it. Once per entry
 * version (and per entry object: a copy read anew counts afresh, but a refresh of a version another instance already
 * replaced reads the new one instead of calling, see loader.ts): a refresh the budget refused is not asked again, the
 * entry goes stale and the stale path refreshes it once. The refresh asks as class `refresh-ahead`: the budget's
 * reserve for it (a tenth of the rate), else spare budget only. Counted in a WeakMap: what is no longer held is
 * forgotten with it.
 */
export class RefreshAhead {
  readonly #hits = new WeakMap<CacheEntry, number>()

  /** Counts a hit on a fresh `entry` whose kind is configured fresh for `freshMs`; true once, at the hit that should refresh it. */
  due (entry: CacheEntry, freshMs: number, now: number): boolean {
    if (now < entry.storedAt + freshMs * HOT_FROM_SHARE) return false
    const counted = this.#hits.get(entry) ?? 0
    if (counted === REFRESHED) return false
    const hits = counted + 1
    const due = hits >= HOT_HITS && now >= entry.storedAt + freshMs * LEAD_START_SHARE
    this.#hits.set(entry, due ? REFRESHED : hits)
    return due
  }
}
