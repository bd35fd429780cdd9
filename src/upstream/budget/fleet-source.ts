import type { RedisHealth } from '../../redis/health.ts'
import type { Membership } from '../../redis/membership.ts'
import type { SharedBudgetBucket } from '../../redis/budget-bucket.ts'
import { effectiveRps, MAX_HOLD_MS, sliceAt, type BudgetSettings, type Slowdown } from './law.ts'
import { LocalBucket } from './local-bucket.ts'
import type { BudgetScope } from '../../telemetry/telemetry.ts'

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
  /** The instances it is shared by: the live count, or while Redis is down the larger of the last seen and the expected. */
  instances: number
}

export interface FleetSourceOptions {
  settings: BudgetSettings
  /** Absent without Redis: the instance then keeps to its share. */
  shared?: Pick<SharedBudgetBucket, 'lease' | 'slowDown'>
  health?: Pick<RedisHealth, 'up'>
  /** The fleet's live count, when Redis is shared (see Membership). */
  members?: Pick<Membership, 'lastSeen'>
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
  /** When it last sent a call on its own share: back on the fleet's bucket within its refill time, it empties it. */
  #sentAloneAt = -Infinity
  #fleetSlowdown: Slowdown | undefined
  #scope: BudgetScope
  #instances: number
  /** The last lease came back after its calls had lapsed: Redis answers, but too slowly for a lease's period. */
  #late = false

  constructor (options: FleetSourceOptions) {
    this.#options = options
    this.#instances = options.settings.instances
    this.#local = new LocalBucket(this.#localLaw(), options.now())
    this.#scope = options.shared !== undefined && this.#sharedUp ? 'fleet' : 'instance'
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
    const lapsesAt = now + settings.leaseMs
    this.#count(now)
    if (shared !== undefined && this.#sharedUp) {
      const slice = sliceAt({ ...settings, instances: this.#instances }, this.rate(now).rps)
      try {
        const batch = slice * this.#instances
        // Late, a lease is used within this instance's share: ask for what that share can hold, not a period's worth.
        const want = Math.min(this.#late ? Math.floor(this.#local.depth(now)) : batch, Math.max(need, demand))
        // Back from its own share: the fleet's bucket refilled as if nobody had sent a call, while each instance sent on
        // its share, which none can count for the others: it starts again empty rather than with a burst on top.
        const drain = this.#scope === 'instance' && now - this.#sentAloneAt < 1000 * settings.burst / settings.rps
        const lease = await shared.lease(want, reserveShare, now, batch, drain)
        this.#fleetSlowdown = lease.slowdown
        this.#scope = 'fleet'
        const at = this.#options.now()
        this.#late = at >= lapsesAt
        if (!this.#late) {
          // Counted here too: when Redis goes, this instance's bucket holds only what it left of its share, not a burst more.
          this.#local.take(lease.granted, 0, now)
          return { granted: lease.granted, retryInMs: lease.retryInMs, lapsesAt }
        }
        // Answered after its calls lapsed (Redis slow, though within its bound): what the fleet granted, within this
        // instance's share, so that every call sent is one the fleet counted, and none beyond the share.
        const taken = this.#local.take(Math.min(need, lease.granted), reserveShare, at)
        return { granted: taken.granted, retryInMs: taken.granted < need ? Math.max(1, lease.retryInMs, taken.retryInMs) : 0, lapsesAt: at + settings.leaseMs }
      } catch (error) {
        onError(error)
      }
    }
    // Off the fleet's bucket, which may have given the others its burst: from an empty bucket of its own, not a burst more.
    if (this.#scope === 'fleet') this.#local.empty(now)
    this.#scope = 'instance'
    const taken = this.#local.take(need, reserveShare, now)
    if (taken.granted > 0) this.#sentAloneAt = now
    return { ...taken, lapsesAt }
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
   * The instances sharing the budget: the live count while Redis is up; else the larger of the last one seen and
   * UPSTREAM_EXPECTED_INSTANCES (operators set it to the fleet's largest size), so that instances started during an
   * outage keep the bound too. The local bucket follows it: when Redis goes, this instance keeps to that share.
   */
  #count (now: number): number {
    const { settings, members, onInstances } = this.#options
    const seen = members?.lastSeen
    const count = seen !== undefined && this.#sharedUp ? seen : Math.max(settings.instances, seen ?? 0)
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
