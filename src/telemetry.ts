import type { CacheState } from './cache/swr-cache.js'

/** What the upstream answered to one call, as metrics and logs name it. */
export type UpstreamOutcome =
  | 'ok' | 'not_found' | 'error' | 'timeout' | 'invalid' | 'rate_limited' | 'auth_refused' | 'short_circuited'

export type Resource = 'profile' | 'timeline'

/**
 * The events operators watch, reported by the logic classes (token manager, upstream client, cache)
 * without knowing how they are exported. The metrics plugin implements it with prom-client;
 * `noTelemetry` serves unit tests and anything built without an app.
 */
export interface Telemetry {
  /** One client-credentials exchange (a token minted, or a failed attempt). */
  tokenExchange: (outcome: 'minted' | 'failed') => void
  upstreamCall: (resource: Resource, outcome: UpstreamOutcome, seconds: number) => void
  cacheResult: (resource: Resource, state: CacheState) => void
  /** A caller that waited for a load another caller (or instance) had already started. */
  coalescedWaiter: (resource: Resource) => void
  backoff: (active: boolean) => void
  breaker: (state: 'closed' | 'open' | 'half_open') => void
}

const ignore = (): void => {}

export const noTelemetry: Telemetry = {
  tokenExchange: ignore,
  upstreamCall: ignore,
  cacheResult: ignore,
  coalescedWaiter: ignore,
  backoff: ignore,
  breaker: ignore
}
