import type { Freshness } from '../cache/cache-entry.ts'
import type { Config } from '../config.ts'
import type { Resource } from '../resources.ts'

/** How long each kind of entry is fresh, then servable stale; an upstream 404 is an entry of its own kind. */
export type FreshnessPolicy = Record<Resource | 'notFound', Freshness>

type FreshnessConfig = Pick<Config, 'PROFILE_TTL_SECONDS' | 'TIMELINE_TTL_SECONDS' | 'STALE_TTL_SECONDS' | 'NOT_FOUND_TTL_SECONDS'>

const seconds = (value: number): number => value * 1000

export function freshnessPolicy (config: FreshnessConfig): FreshnessPolicy {
  return {
    profile: { freshMs: seconds(config.PROFILE_TTL_SECONDS), staleMs: seconds(config.STALE_TTL_SECONDS) },
    timeline: { freshMs: seconds(config.TIMELINE_TTL_SECONDS), staleMs: seconds(config.STALE_TTL_SECONDS) },
    // A negative entry may be served stale as long again while it revalidates (after a purge, say).
    notFound: { freshMs: seconds(config.NOT_FOUND_TTL_SECONDS), staleMs: seconds(config.NOT_FOUND_TTL_SECONDS) }
  }
}
