import type { Config } from '../../config.ts'

/** After a halving the effective rate climbs back by this share of the configured rate per second (half to full: 5 s). */
export const RECOVERY_PER_SECOND = 0.1
/** Halvings stop at this share of the configured rate, so that the budget always recovers. */
export const FLOOR_SHARE = 1 / 16
/** 429s this soon after a halving answer the calls sent before it: one signal, one halving. */
export const HALVING_COOLDOWN_MS = 1_000
/** A Retry-After longer than this holds the recovery no longer (the back-off window caps it alike). */
export const MAX_HOLD_MS = 300_000
/** An instance leases about this long's worth of its share at once; calls it has not used by then lapse. */
const LEASE_MS = 100
/** A lease must outlive its own round trip to Redis. */
const MIN_LEASE_MS = 20
/** Leases in flight may hold up to two leases' worth of the rate: keep that within a quarter of the bucket. */
const LEASE_SHARE_OF_BURST = 1 / 8

/** The configured budget; `burst` is the bucket's depth. */
export interface BudgetSettings {
  rps: number
  burst: number
  instances: number
  /** How long a lease's calls may be used. */
  leaseMs: number
}

/** The budget of `config`, or undefined when the upstream's rate is unlimited. */
export function budgetSettings (config: Pick<Config, 'UPSTREAM_MAX_RPS' | 'UPSTREAM_BURST' | 'UPSTREAM_EXPECTED_INSTANCES'>): BudgetSettings | undefined {
  const rps = config.UPSTREAM_MAX_RPS
  if (rps === 0) return undefined
  const burst = config.UPSTREAM_BURST ?? rps
  const leaseMs = Math.max(MIN_LEASE_MS, Math.min(LEASE_MS, 1000 * burst * LEASE_SHARE_OF_BURST / rps))
  return { rps, burst, instances: config.UPSTREAM_EXPECTED_INSTANCES, leaseMs }
}

/** The last halving: the rate it left, when, and when the recovery starts (after the upstream's Retry-After). */
export interface Slowdown {
  cutRps: number
  cutAt: number
  recoverFrom: number
}

/** The rate in force at `now` for a configured `rps`: the last halving's, climbing back linearly. */
export function effectiveRps (rps: number, slowdown: Slowdown | undefined, now: number): number {
  if (slowdown === undefined) return rps
  return Math.min(rps, slowdown.cutRps + rps * RECOVERY_PER_SECOND * Math.max(0, now - slowdown.recoverFrom) / 1000)
}

/** The slowdown after an upstream 429 at `now`, recovering after `holdMs`; the same one within the cooldown of the last halving. */
export function halved (rps: number, slowdown: Slowdown | undefined, now: number, holdMs: number): Slowdown {
  if (slowdown !== undefined && now - slowdown.cutAt < HALVING_COOLDOWN_MS) return slowdown
  const cutRps = Math.max(rps * FLOOR_SHARE, effectiveRps(rps, slowdown, now) / 2)
  return { cutRps, cutAt: now, recoverFrom: now + holdMs }
}

/** The bucket's depth at an effective rate: a burst shrinks with the rate, never below one call. */
export function depthAt (settings: Pick<BudgetSettings, 'rps' | 'burst'>, rps: number): number {
  return Math.max(1, settings.burst * rps / settings.rps)
}

/** The calls one instance leases at once: a lease's worth of its share of the rate, at least one. */
export function sliceAt (settings: BudgetSettings, rps: number): number {
  return Math.max(1, Math.floor(rps / settings.instances * settings.leaseMs / 1000))
}

/** How long state in Redis must live: until a bucket emptied at the floor rate is full and recovered again. */
export function stateTtlMs (settings: Pick<BudgetSettings, 'rps' | 'burst'>): number {
  const refillS = settings.burst / (settings.rps * FLOOR_SHARE)
  const recoverS = (1 - FLOOR_SHARE) / RECOVERY_PER_SECOND
  return Math.ceil((refillS + recoverS) * 1000) + MAX_HOLD_MS
}
