import type { RedisClock } from './clock.ts'
import type { RedisCommands } from './commands.ts'
import type { RedisHealth } from './health.ts'
import { LEASE, SLOW_DOWN } from './budget-script.ts'

/** The bucket's law, as numbers (the caller owns the law: see upstream/budget/law.ts). */
export interface SharedBudgetLaw {
  /** Calls per second, the whole deployment's. */
  rps: number
  /** The bucket's depth at the full rate. */
  burst: number
  leaseMs: number
  /** Calls/s the effective rate regains per second after a halving. */
  recoveryRps: number
  /** The effective rate never falls below this many calls/s. */
  floorRps: number
  cooldownMs: number
  ttlMs: number
}

/** The last halving, in this instance's times. */
export interface SharedSlowdown {
  cutRps: number
  cutAt: number
  recoverFrom: number
}

export interface SharedLease {
  granted: number
  /** When one more call could be granted, if fewer than wanted were. */
  retryInMs: number
  slowdown: SharedSlowdown | undefined
  /**
   * Until when (this instance's time, less its clock's error, up to half a lease) the bucket counts the calls granted
   * as held: past it, they may go to others too.
   */
  heldUntil: number
}

export interface SharedBudgetBucketOptions {
  redis: Pick<RedisCommands, 'eval'>
  health: Pick<RedisHealth, 'run'>
  clock: Pick<RedisClock, 'toRedis' | 'toLocal' | 'errorMs'>
  /** Under the deployment's prefix: one key for the whole fleet. */
  key: string
  law: SharedBudgetLaw
}

/**
 * The fleet's upstream budget in Redis (see budget-script.ts): one EVAL per lease of several calls, one per halving.
 * Every failure rejects (CACHE_UNAVAILABLE, from RedisHealth): the caller then counts on its own share.
 */
export class SharedBudgetBucket {
  readonly #options: SharedBudgetBucketOptions

  constructor (options: SharedBudgetBucketOptions) {
    this.#options = options
  }

  /**
   * Up to `want` calls at `now` (local), leaving `reserveShare` of the bucket to others; when that leaves it empty,
   * `retryInMs` is when `batch` more could be had (asking for each call as it refills would cost a round trip per call).
   * `drain`: the instance sent calls on its own share while Redis was away; the bucket is emptied first.
   */
  async lease (want: number, reserveShare: number, now: number, batch: number, drain = false): Promise<SharedLease> {
    const { redis, health, clock, key, law } = this.#options
    const reply = await health.run(async () => await redis.eval(LEASE, 1, key, clock.toRedis(now), want, law.rps, law.burst,
      law.leaseMs, reserveShare, law.recoveryRps / 1000, law.ttlMs, batch, drain ? 1 : 0)) as [number, number, string, string, string, string]
    const [granted, retryInMs, cut, cutAt, from, heldUntil] = reply
    const margin = Math.min(clock.errorMs, law.leaseMs / 2)
    return { granted, retryInMs, slowdown: this.#slowdownOf([cut, cutAt, from]), heldUntil: clock.toLocal(Number(heldUntil)) - margin }
  }

  /** Halves the fleet's rate (once per cooldown); its recovery starts `holdMs` from `now`. */
  async slowDown (now: number, holdMs: number): Promise<SharedSlowdown | undefined> {
    const { redis, health, clock, key, law } = this.#options
    const reply = await health.run(async () => await redis.eval(SLOW_DOWN, 1, key, clock.toRedis(now), law.rps,
      law.recoveryRps / 1000, Math.round(holdMs), law.cooldownMs, law.floorRps / law.rps, law.ttlMs)) as [string, string, string]
    return this.#slowdownOf(reply)
  }

  #slowdownOf ([cut, cutAt, from]: string[]): SharedSlowdown | undefined {
    if (cut === undefined || cut === '') return undefined
    const { clock } = this.#options
    return { cutRps: Number(cut), cutAt: clock.toLocal(Number(cutAt)), recoverFrom: clock.toLocal(Number(from)) }
  }
}
