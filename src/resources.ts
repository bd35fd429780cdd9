/** The upstream's per-username resources: each is cached as its own entry and counted under its name. */
export const RESOURCES = ['profile', 'timeline'] as const
export type Resource = typeof RESOURCES[number]

/** How an answer was made, as `X-Cache` names it. */
export type CacheState = 'HIT' | 'MISS' | 'STALE' | 'BYPASS'
