/** The upstream's per-username resources: each is cached as its own entry and counted under its name. */
export const RESOURCES = ['profile', 'timeline'] as const
export type Resource = typeof RESOURCES[number]

/** The largest upstream body the service reads (a larger one is refused): a profile or a timeline is a few KiB. */
export const MAX_UPSTREAM_BODY_BYTES = 1024 * 1024

/** How an answer was made, as `X-Cache` names it. */
export type CacheState = 'HIT' | 'MISS' | 'STALE' | 'BYPASS'

/** Why a load asks the upstream, highest first: when the fleet's upstream budget is short, a class waits behind every class above it. */
export const PRIORITIES = ['caller', 'background', 'refresh-ahead'] as const

/**
 * `caller`: a caller waiting with nothing to serve; `background`: a stale-while-revalidate refresh;
 * `refresh-ahead`: a hot entry refreshed before it goes stale.
 */
export type Priority = typeof PRIORITIES[number]
