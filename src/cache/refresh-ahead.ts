import type { CacheEntry } from './cache-entry.ts'

/** Hits from nine tenths into the configured freshness that make an entry hot. */
const HOT_HITS = 5
/** Refresh-ahead waits for nine tenths of the configured freshness, so a hot key costs at most one call per nine tenths of it. */
const LEAD_START_SHARE = 0.9

/**
 * Which hit should refresh its entry ahead of time: the HOT_HITS-th from nine tenths of the *configured* freshness
 * after the entry was stored, so that a hot profile is never served stale nor costs a caller a miss. The configured
 * freshness, not the entry's own: jitter shortens that by up to a tenth, and nine tenths of it would replace a version
 * 0.81 of the freshness after it was stored; an entry jitter left shorter than nine tenths is not refreshed ahead, the
 * stale path (from its end, at nine tenths or later) refreshes it. Once per entry version (and per entry object: a copy
 * read anew counts afresh, but a refresh of a version another instance already replaced reads the new one instead of
 * calling, see loader.ts): a refresh the budget refused is not asked again, the entry goes stale and the stale path
 * refreshes it once. The refresh asks as class `refresh-ahead`: the budget's reserve for it (a tenth of the rate), else
 * spare budget only. Counted in a WeakMap: what is no longer held is forgotten with it.
 */
export class RefreshAhead {
  readonly #hits = new WeakMap<CacheEntry, number>()

  /** Counts a hit on a fresh `entry` whose kind is configured fresh for `freshMs`; true once, at the hit that makes it hot. */
  due (entry: CacheEntry, freshMs: number, now: number): boolean {
    if (now < entry.storedAt + freshMs * LEAD_START_SHARE) return false
    const hits = (this.#hits.get(entry) ?? 0) + 1
    this.#hits.set(entry, hits)
    return hits === HOT_HITS
  }
}
