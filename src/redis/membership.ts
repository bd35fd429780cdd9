import { randomUUID } from 'node:crypto'
import type { RedisClock } from './clock.ts'
import type { RedisCommands } from './commands.ts'
import type { RedisHealth } from './health.ts'

/** How long an instance counts as live after its last beat; a beat comes every third of it, so two may be missed. */
export const MEMBER_LIFETIME_MS = 3_000

/**
 * KEYS[1] the members (a sorted set: one entry per instance, scored by its last beat on Redis's clock); ARGV: now,
 * this instance's id, lifetime ms. Announces the instance, forgets those silent for a lifetime, returns the count.
 * One key: one hash slot, so it runs on a Cluster too.
 */
const BEAT = `
local now, lifetime = tonumber(ARGV[1]), tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], now, ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - lifetime)
redis.call('PEXPIRE', KEYS[1], lifetime)
return redis.call('ZCARD', KEYS[1])`

export interface MembershipOptions {
  redis: Pick<RedisCommands, 'eval'> & { zrem: (key: string, member: string) => Promise<unknown> }
  health: Pick<RedisHealth, 'run' | 'listen'>
  clock: Pick<RedisClock, 'toRedis'>
  /** The deployment's members key, `<prefix>members`. */
  key: string
  now: () => number
  /** Runs `run` in `ms`, returning its cancellation: the app's timers (tests move a clock instead). */
  schedule: (ms: number, run: () => void) => () => void
  onError: (error: unknown) => void
}

/**
 * This instance's place in the fleet's live count, renewed every third of a lifetime through Redis (while Redis is
 * down the beat fails fast and the counts seen stay). Closed, it leaves the count at once.
 */
export class Membership {
  readonly #options: MembershipOptions
  readonly #id = randomUUID()
  #cancel: (() => void) | undefined
  /** The counts Redis answered over its last lifetime of answering, oldest first. */
  #answers: Array<{ at: number, count: number }> = []
  /** A beat failed since the last answer: Redis was away, and may come back with the members forgotten. */
  #away = false
  #closed = false

  constructor (options: MembershipOptions) {
    this.#options = options
  }

  /** The live count at the last beat Redis answered; undefined before the first. */
  get lastSeen (): number | undefined {
    return this.#answers.at(-1)?.count
  }

  /**
   * The largest count Redis answered over its last lifetime of answering (time it was away does not count); undefined
   * before the first. The share while Redis is away: a count answered just after the members were forgotten is low.
   */
  get recentMost (): number | undefined {
    return this.#answers.length === 0 ? undefined : Math.max(...this.#answers.map((answer) => answer.count))
  }

  /** Announces this instance now, every third of a lifetime and as soon as Redis is back, until closed. */
  start (): void {
    const { schedule, health, onError } = this.#options
    const beat = (): void => {
      this.#cancel = schedule(MEMBER_LIFETIME_MS / 3, beat)
      this.beat().catch(onError)
    }
    health.listen((up) => { if (up) this.beat().catch(onError) })
    beat()
  }

  async beat (): Promise<void> {
    if (this.#closed) return
    const { redis, health, clock, key, now } = this.#options
    const at = now()
    const count = await health.run(async () => await redis.eval(BEAT, 1, key, clock.toRedis(at), this.#id, MEMBER_LIFETIME_MS))
      .catch((error: unknown) => { this.#away = true; throw error })
    // Back after Redis was away (restarted empty, say: the first beats count only those back before them), the largest
    // count from before stays a lifetime more, the time every live instance takes to beat again.
    const most = this.recentMost
    const before = this.#away && most !== undefined ? [{ at, count: most }] : this.#answers
    this.#away = false
    this.#answers = [...before.filter((answer) => answer.at > at - MEMBER_LIFETIME_MS), { at, count: Number(count) }]
  }

  async close (): Promise<void> {
    this.#closed = true
    this.#cancel?.()
    const { redis, health, key, onError } = this.#options
    await health.run(async () => await redis.zrem(key, this.#id)).catch(onError)
  }
}
