/**
 * This instance's clock against Redis's. What instances compare (an entry's freshness and age) is
 * kept on Redis's clock: each instance converts with its own offset, measured by a TIME when Redis
 * comes up (half a round trip of error: hundreds of ms from a process busy starting) and narrowed by
 * each later TIME (the health probe's, once a second), so instances whose clocks disagree still agree
 * on it. What that error cannot be allowed to decide (a load before or after a purge) takes no time at
 * all. A step of Redis's host clock takes effect at the next reconnection (the local clock is steady: steady-clock.ts).
 */
export class RedisClock {
  readonly #localNow: () => number
  #offsetMs = 0
  /** Where the true offset lies: each TIME says it is within its round trip (ms, a millisecond of rounding either side). */
  #lowMs = -Infinity
  #highMs = Infinity

  constructor (localNow: () => number) {
    this.#localNow = localNow
  }

  toRedis (localMs: number): number {
    return Math.round(localMs - this.#offsetMs)
  }

  toLocal (redisMs: number): number {
    return redisMs + this.#offsetMs
  }

  /** `time`: Redis's TIME answer (seconds, microseconds), asked at `sentAt` and answered at `receivedAt`, local times. */
  sync (time: [string, string], sentAt: number, receivedAt: number): void {
    [this.#lowMs, this.#highMs] = bounds(time, sentAt, receivedAt)
    this.#offsetMs = (this.#lowMs + this.#highMs) / 2
  }

  /**
   * A later TIME, as `sync`'s: the offset is kept within both answers' round trips, so a quicker one narrows it. One
   * that disagrees with what is known (the host's clock stepped, or a test moved it) is left for the next `sync`.
   */
  refine (time: [string, string], sentAt: number, receivedAt: number): void {
    const [low, high] = bounds(time, sentAt, receivedAt)
    if (low > this.#highMs || high < this.#lowMs) return
    this.#lowMs = Math.max(low, this.#lowMs)
    this.#highMs = Math.min(high, this.#highMs)
    this.#offsetMs = (this.#lowMs + this.#highMs) / 2
  }

  /** How far this instance's conversions may be from Redis's clock (ms): what a time it measures on Redis's clock can claim. */
  get errorMs (): number {
    return (this.#highMs - this.#lowMs) / 2
  }

  get localNow (): () => number {
    return this.#localNow
  }
}

/** The offsets (local - Redis) a TIME answer allows: Redis read its clock between the request's sending and the reply's arrival. */
function bounds (time: [string, string], sentAt: number, receivedAt: number): [number, number] {
  const redisMs = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000)
  return [sentAt - redisMs - 1, receivedAt - redisMs + 1]
}
