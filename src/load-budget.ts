import type { Config } from './config.ts'

/** Every time limit of one load, derived from the configuration here and nowhere else. */
export interface LoadBudget {
  /** An upstream call's whole time, queue, token and request included (UPSTREAM_TIMEOUT_MS). */
  callerMs: number
  /**
   * How long a caller waits for a load at most, from when it asked, whoever makes the load (this instance or
   * another): the call's own time and a margin, so that the call's deadline, when it is the one, answers first.
   */
  callerWaitMs: number
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
}

const MARGIN_MS = 1_000
const CALLER_MARGIN_MS = 250
const EXCHANGE_WAIT_MARGIN_MS = 2_000
const LOCK_TTL_MS = 1_000

export function loadBudget ({ UPSTREAM_TIMEOUT_MS: timeoutMs }: Pick<Config, 'UPSTREAM_TIMEOUT_MS'>): LoadBudget {
  const loadMs = 2 * timeoutMs + MARGIN_MS
  return {
    callerMs: timeoutMs,
    callerWaitMs: timeoutMs + CALLER_MARGIN_MS,
    exchangeMs: timeoutMs,
    exchangeWaitMs: timeoutMs + EXCHANGE_WAIT_MARGIN_MS,
    loadMs,
    lockTtlMs: LOCK_TTL_MS,
    maxClaims: Math.ceil(loadMs / LOCK_TTL_MS),
    purgeMemoryMs: 2 * loadMs
  }
}
