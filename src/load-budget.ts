import type { Config } from './config.ts'

/** Every time limit of one load, derived from the configuration here and nowhere else. */
export interface LoadBudget {
  /**
   * UPSTREAM_TIMEOUT_MS: a caller's time for the upstream from its arrival (queue and token included), and a sent
   * call's own limit from when it is sent (its answer is kept whoever still waits for it).
   */
  callerMs: number
  /**
   * How long a caller waits for a load at most, from its request's arrival (what it queued for before the lookup
   * counts), whoever makes the load: its time less what sending the answer takes, so it is answered within its deadline.
   */
  callerWaitMs: number
  /**
   * A load's one deadline, this long after the arrival of the caller that started it, a little before its wait ends:
   * its call is sent only while the time left covers what the upstream has been taking, and what kept it unsent (a
   * budget spent, 503 UPSTREAM_BUDGET_EXHAUSTED) is then the answer, not a timeout. A sent call is not cut by it.
   */
  callerLoadMs: number
  /** One token exchange with the identity provider. */
  exchangeMs: number
  /** How long an instance waits for another instance's exchange: that exchange, and a margin. */
  exchangeWaitMs: number
  /** One load from its start to its store, another instance's included: the bound of a waiter's wait for it. */
  loadMs: number
  /** An owner lock's lifetime, renewed while its job runs: a crashed owner's lock frees itself after this. */
  lockTtlMs: number
  /** How many lock lifetimes a waiter waits for another instance's load before it loads on its own. */
  maxClaims: number
  /** How long a purge is remembered for the loads that started before it: longer than such a load may last. */
  purgeMemoryMs: number
  /**
   * What a shutdown must leave the loads under way for every sent call to end: a call may be sent up to `callerMs`
   * into its load (a revalidation's deadline; a caller's comes earlier), then run `callerMs`.
   */
  drainMs: number
}

const MARGIN_MS = 1_000
/**
 * Kept from a caller's time for its answer to reach it (an event loop under load included): a tenth, at most this.
 * The budget bench saw instances' event loops up to 0.33 s late in their busiest second (bench/README.md).
 */
const ANSWER_MARGIN_MS = 500
/** A load's refusal travels to its callers within this share of the answer's margin. */
const LOAD_LEAD_SHARE = 0.2
const EXCHANGE_WAIT_MARGIN_MS = 2_000
const LOCK_TTL_MS = 1_000

export function loadBudget ({ UPSTREAM_TIMEOUT_MS: timeoutMs }: Pick<Config, 'UPSTREAM_TIMEOUT_MS'>): LoadBudget {
  const loadMs = 2 * timeoutMs + MARGIN_MS
  const answerMarginMs = Math.min(ANSWER_MARGIN_MS, timeoutMs / 10)
  return {
    callerMs: timeoutMs,
    callerWaitMs: timeoutMs - answerMarginMs,
    callerLoadMs: timeoutMs - answerMarginMs * (1 + LOAD_LEAD_SHARE),
    exchangeMs: timeoutMs,
    exchangeWaitMs: timeoutMs + EXCHANGE_WAIT_MARGIN_MS,
    loadMs,
    lockTtlMs: LOCK_TTL_MS,
    maxClaims: Math.ceil(loadMs / LOCK_TTL_MS),
    purgeMemoryMs: 2 * loadMs,
    drainMs: 2 * timeoutMs
  }
}

/** When a caller's request arrived: how long ago, in ms (a Fastify reply's `elapsedTime`, read only when a lookup must wait). */
export interface Arrival {
  readonly elapsedTime: number
}
