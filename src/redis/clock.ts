/**
 * This instance's clock against Redis's. What instances compare (an entry's freshness and age) is
 * kept on Redis's clock: each instance converts with its own offset, measured by a TIME when Redis
 * comes up (half a round trip of error), so instances whose clocks disagree still agree on it. What
 * that error cannot be allowed to decide (a load before or after a purge) takes no time at all.
 * A step of the host's clock takes effect at the next reconnection.
 */
export class RedisClock {
  readonly #localNow: () => number
  #offsetMs = 0

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
    const redisMs = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000)
    this.#offsetMs = (sentAt + receivedAt) / 2 - redisMs
  }

  get localNow (): () => number {
    return this.#localNow
  }
}
