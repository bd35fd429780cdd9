import type { RefusalReason } from '../errors.ts'
import type { CacheState, Priority, Resource } from '../resources.ts'

/**
 * What the upstream answered to one call, as metrics and logs name it: `short_circuited` was never sent,
 * `cancelled` was dropped unsent because nobody waited for its answer any more (a call once sent runs to its answer).
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
  /** The instances the budget is shared by, when that changes (see FleetSource). */
  budgetInstances: (count: number) => void
}

/** What the in-process store holds, and its bound, in bytes as `entryBytes` counts them. */
export interface StoreHeld {
  entries: number
  bytes: number
  maxBytes: number
}

/** What the in-process store reports: how full it is, and when its bound pushes out entries still fresh (it is too small). */
export interface StoreTelemetry {
  /** The store to read when the metrics are rendered. */
  memoryStore: (held: () => StoreHeld) => void
  freshEviction: () => void
}

/** What the instances' event bus reports (see RedisBus). */
export interface BusTelemetry {
  /** Whether the other instances' events reach this one. */
  up: (ready: boolean) => void
  /** A purge elsewhere applied here, this long after it was made (Redis's clock). */
  purgePropagation: (seconds: number) => void
}

/** The events operators watch, so that the logic classes report them without knowing how they are exported. */
export interface Telemetry extends BudgetTelemetry {
  /** One client-credentials exchange (a token minted, or a failed attempt). */
  tokenExchange: (outcome: 'minted' | 'failed') => void
  upstreamCall: (resource: Resource, outcome: UpstreamOutcome, seconds: number) => void
  cacheResult: (resource: Resource, state: CacheState) => void
  /** A caller that waited for a load another caller (or instance) had already started. */
  coalescedWaiter: (resource: Resource) => void
  /** A caller answered at once with a refusal (no token, a back-off, the budget spent, the queue full, the circuit open). */
  refusal: (reason: RefusalReason) => void
  /** Whether the upstream's back-off window (429 Retry-After) is in force. */
  backoff: (active: boolean) => void
  breaker: (state: BreakerState) => void
  /** Whether Redis answers (see RedisHealth). */
  redis: (up: boolean) => void
  bus: BusTelemetry
}

const ignore = (): void => {}

export const noTelemetry: Telemetry = {
  tokenExchange: ignore,
  upstreamCall: ignore,
  cacheResult: ignore,
  coalescedWaiter: ignore,
  refusal: ignore,
  backoff: ignore,
  breaker: ignore,
  redis: ignore,
  bus: { up: ignore, purgePropagation: ignore },
  budgetCall: ignore,
  budgetDeferred: ignore,
  budgetDropped: ignore,
  budgetRate: ignore,
  budgetInstances: ignore
}
