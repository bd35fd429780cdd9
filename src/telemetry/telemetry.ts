import type { CacheState, Priority, Resource } from '../resources.ts'

/**
 * What the upstream answered to one call, as metrics and logs name it: `short_circuited` was never sent,
 * `cancelled` was sent and aborted because nobody waited for its answer any more.
 */
export type UpstreamOutcome =
  | 'ok' | 'not_found' | 'error' | 'timeout' | 'invalid' | 'rate_limited' | 'auth_refused' | 'short_circuited' | 'cancelled'

export type BreakerState = 'closed' | 'open' | 'half_open'

/** Why background work was turned away by the fleet's upstream budget. */
export type DropReason = 'queue_full' | 'waited_too_long'

/** Where the effective budget comes from: the fleet's bucket in Redis, or this instance's share while it cannot be reached. */
export type BudgetScope = 'fleet' | 'instance'

/** What the fleet's upstream budget reports. */
export interface BudgetTelemetry {
  /** A call let through to the upstream. */
  budgetCall: (priority: Priority) => void
  /** A call that found no budget at once and waited for it. */
  budgetDeferred: (priority: Priority) => void
  /** Background work dropped, or a caller refused at its deadline (`deadline`). */
  budgetDropped: (priority: Priority, reason: DropReason | 'deadline') => void
  /** The effective rate when it changes. */
  budgetRate: (rps: number, scope: BudgetScope) => void
}

/** The events operators watch, so that the logic classes report them without knowing how they are exported. */
export interface Telemetry extends BudgetTelemetry {
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
  redis: ignore,
  budgetCall: ignore,
  budgetDeferred: ignore,
  budgetDropped: ignore,
  budgetRate: ignore
}
