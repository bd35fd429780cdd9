import type { CacheState, Resource } from '../resources.ts'

/**
 * What the upstream answered to one call, as metrics and logs name it: `short_circuited` was never sent,
 * `cancelled` was sent and aborted because nobody waited for its answer any more.
 */
export type UpstreamOutcome =
  | 'ok' | 'not_found' | 'error' | 'timeout' | 'invalid' | 'rate_limited' | 'auth_refused' | 'short_circuited' | 'cancelled'

export type BreakerState = 'closed' | 'open' | 'half_open'

/** The events operators watch, so that the logic classes report them without knowing how they are exported. */
export interface Telemetry {
  /** One client-credentials exchange (a token minted, or a failed attempt). */
  tokenExchange: (outcome: 'minted' | 'failed') => void
  upstreamCall: (resource: Resource, outcome: UpstreamOutcome, seconds: number) => void
  cacheResult: (resource: Resource, state: CacheState) => void
  /** A caller that waited for a load another caller (or instance) had already started. */
  coalescedWaiter: (resource: Resource) => void
  /** Whether the upstream's back-off window (429 Retry-After) is in force. */
  backoff: (active: boolean) => void
  breaker: (state: BreakerState) => void
  /** Whether Redis answers (see RedisHealth). */
  redis: (up: boolean) => void
}

const ignore = (): void => {}

export const noTelemetry: Telemetry = {
  tokenExchange: ignore,
  upstreamCall: ignore,
  cacheResult: ignore,
  coalescedWaiter: ignore,
  backoff: ignore,
  breaker: ignore,
  redis: ignore
}
