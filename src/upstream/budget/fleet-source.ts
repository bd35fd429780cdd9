import type { RedisHealth } from '../../redis/health.ts'
import type { Membership } from '../../redis/membership.ts'
import type { SharedBudgetBucket, SharedLease } from '../../redis/budget-bucket.ts'
import { effectiveRps, MAX_HOLD_MS, sliceAt, type BudgetSettings, type Slowdown } from './law.ts'
import { LocalBucket } from './local-bucket.ts'
import type { BudgetScope } from '../../telemetry/telemetry.ts'

/** After a lease Redis answered too late to use, this instance keeps to its own share this long before asking again. */
const SLOW_REDIS_HOLD_MS = 5_000

/** Calls granted to this instance. */
export interface Grant {
  granted: number
  /** When to ask again, if fewer than needed were granted. */
  retryInMs: number
  /** After this (local time) the calls not yet used lapse: the fleet's count of held calls forgets them. */
  lapsesAt: number
}

export interface BudgetRate {
  /** Calls/s in force: the fleet's, or this instance's share while on its own. */
  rps: number
  scope: BudgetScope
  /** What this instance may expect of it. */
  shareRps: number
  /** The instances it is shared by: the live count, or while Redis is down the larger of the largest recent count and the expected. */
  instances: number
}

export interface FleetSourceOptions {
  settings: BudgetSettings
  /** Absent without Redis: the instance then keeps to its share. */
  shared?: Pick<SharedBudgetBucket, 'lease' | 'slowDown'>
  /** Whether Redis answers, and (where it can tell) when that changes. */
  health?: Pick<RedisHealth, 'up'> & Partial<Pick<RedisHealth, 'listen'>>
  /** The fleet's live count, when Redis is shared (see Membership). */
  members?: Pick<Membership, 'lastSeen' | 'recentMost'>
  /** The app's clock. */
  now: () => number
  /** The instances counted, when that changes (a gauge). */
  onInstances?: (count: number) => void
  onError: (error: unknown) => void
}

/**
 * Where calls come from: the fleet's bucket in Redis while Redis is up, a lease of several calls at a time; else,
 * at once, this instance's own bucket of `rps / instances`. Never rejects: Redis failing is only a change of scope.
 */
export class FleetSource {
  readonly #options: FleetSourceOptions
  readonly #local: LocalBucket
  /** When Redis was last away for this instance (down, or too slow): a lease within a refill time of it empties the fleet's bucket. */
  #awayAt = -Infinity
  /** Until then its calls come from its own share without asking Redis, whose last lease came back too late. */
  #slowUntil = -Infinity
  #fleetSlowdown: Slowdown | undefined
  #scope: BudgetScope
  #instances: number

  constructor (options: FleetSourceOptions) {
    this.#options = options
    this.#instances = options.settings.instances
    this.#local = new LocalBucket(this.#localLaw(), options.now())
    this.#scope = options.shared !== undefined && this.#sharedUp ? 'fleet' : 'instance'
    // An idle instance learns of an outage here (it may lease first when Redis is back); Redis first coming up as the
    // instance starts is none: a deploy's every new instance would empty the fleet's bucket.
    let first = true
    options.health?.listen?.((up) => {
      if (!first || !up) this.#awayAt = options.now()
      first = false
    })
    options.onInstances?.(this.#instances)
  }

  /**
   * Calls for `need` waiters. From Redis, as many as needed or recently used (`demand`), up to a lease period's worth
   * of the fleet's rate; when that empties the bucket, ask again once as much has refilled (about a lease period
   * later), so that a busy instance asks once per lease period, not once per call, and the instances waiting for the
   * same refill each find some of it.
   */
  async lease (need: number, demand: number, reserveShare: number, now: number): Promise<Grant> {
    const { settings, shared, onError } = this.#options
    this.#count(now)
    if (shared === undefined || !this.#sharedUp) return this.#alone(need, reserveShare, now, 'down')
    if (now < this.#slowUntil) return this.#alone(need, reserveShare, now, 'slow')
    const slice = sliceAt({ ...settings, instances: this.#instances }, this.rate(now).rps)
    const batch = slice * this.#instances
    let lease: SharedLease
    try {
      // Back after Redis was away: the fleet's bucket refilled meanwhile as if nobody had sent a call, while every
      // instance sent on its share, which none can count for the others. It starts again empty, not a burst on top.
      const awayAt = this.#awayAt
      const drain = now - awayAt < 1000 * settings.burst / settings.rps
      lease = await shared.lease(Math.min(batch, Math.max(need, demand)), reserveShare, now, batch, drain)
      // Unless Redis went away again meanwhile.
      if (drain && this.#awayAt === awayAt) this.#awayAt = -Infinity
    } catch (error) {
      onError(error)
      // A lease that timed out has marked Redis down already: that is an outage, not a flap.
      return this.#alone(need, reserveShare, this.#options.now(), this.#sharedUp ? 'failed' : 'down')
    }
    this.#fleetSlowdown = lease.slowdown
    const at = this.#options.now()
    // Answered after the bucket stopped counting its calls (Redis slow, within its bound): they may be others' by now,
    // and each lease would hold its callers for a round trip: its own share serves for a while, asking Redis nothing.
    if (at >= lease.heldUntil) {
      this.#slowUntil = at + SLOW_REDIS_HOLD_MS
      return this.#alone(need, reserveShare, at, 'slow')
    }
    this.#scope = 'fleet'
    // Counted here too: a failed lease goes on from what this instance left of its share, not a burst more.
    this.#local.take(lease.granted, 0, now)
    return { granted: lease.granted, retryInMs: lease.retryInMs, lapsesAt: lease.heldUntil }
  }

  /**
   * Calls from this instance's own share. Leaving the fleet's bucket, which may have given the others its burst, for
   * Redis down or too slow: from an empty bucket of its own. For one lease that failed while Redis answers: from what
   * the bucket holds (what this instance left of its share), at once, since a flap should cost no caller.
   */
  #alone (need: number, reserveShare: number, now: number, why: 'down' | 'slow' | 'failed'): Grant {
    if (why !== 'failed' && this.#scope === 'fleet') this.#local.empty(now)
    if (why !== 'failed') this.#awayAt = now
    this.#scope = 'instance'
    return { ...this.#local.take(need, reserveShare, now), lapsesAt: now + this.#options.settings.leaseMs }
  }

  /** An upstream 429: halves this instance's share and, through Redis, the fleet's. */
  async slowDown (now: number, holdMs: number): Promise<void> {
    const hold = Math.min(MAX_HOLD_MS, Math.max(0, holdMs))
    this.#local.slowDown(now, hold)
    const { shared, onError } = this.#options
    if (shared === undefined || !this.#sharedUp) return
    try {
      this.#fleetSlowdown = await shared.slowDown(now, hold)
    } catch (error) {
      onError(error)
    }
  }

  rate (now: number): BudgetRate {
    const instances = this.#count(now)
    if (this.#scope === 'instance') {
      const local = this.#local.rps(now)
      return { rps: local, scope: 'instance', shareRps: local, instances }
    }
    const fleet = effectiveRps(this.#options.settings.rps, this.#fleetSlowdown, now)
    return { rps: fleet, scope: 'fleet', shareRps: fleet / instances, instances }
  }

  /**
   * The instances sharing the budget: the live count while Redis is up; else the larger of the largest count of
   * Redis's last lifetime of answers (`Membership.recentMost`: the last may be low only because Redis restarted empty)
   * and UPSTREAM_EXPECTED_INSTANCES (operators set it to the fleet's largest size), so that instances started during
   * an outage keep the bound too. The local bucket follows it: when Redis goes, this instance keeps to that share.
   */
  #count (now: number): number {
    const { settings, members, onInstances } = this.#options
    const seen = members?.lastSeen
    const count = seen !== undefined && this.#sharedUp ? seen : Math.max(settings.instances, members?.recentMost ?? 0)
    if (count !== this.#instances) {
      this.#instances = count
      this.#local.resize(this.#localLaw(), now)
      onInstances?.(count)
    }
    return count
  }

  #localLaw (): { rps: number, burst: number } {
    const { rps, burst } = this.#options.settings
    return { rps: rps / this.#instances, burst: Math.max(1, burst / this.#instances) }
  }

  get #sharedUp (): boolean {
    return this.#options.health?.up ?? true
  }
}
