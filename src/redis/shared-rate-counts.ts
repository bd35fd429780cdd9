import type { RedisCommands } from './commands.ts'
import type { RedisHealth } from './health.ts'

export interface SharedRateCountsOptions {
  redis: Pick<RedisCommands, 'incrby' | 'pexpire'>
  health: Pick<RedisHealth, 'up' | 'run'>
  /** Prepended to every counter's key: `<prefix><client>:<window>`. */
  keyPrefix: string
  /** How often the counts taken here are added to Redis, and the deployment's read back. */
  syncIntervalMs?: number
  now?: () => number
  onError: (error: unknown) => void
}

/** @fastify/rate-limit's answer for a counted request: the deployment-wide count and ms left in the window. */
export interface RateCount { current: number, ttl: number }
type Answer = (error: Error | null, count?: RateCount) => void

interface Client { shared: number, pending: number }

/** A counter outlives its window by this much, so an instance whose clock is a little behind still finds it. */
const EXPIRY_SLACK_MS = 5_000

/**
 * A @fastify/rate-limit store whose counts every instance shares through Redis without a Redis
 * command per request. Windows are fixed and aligned to the clock, so every instance counts into the
 * same key. A client's first request here asks Redis (INCRBY 1: the deployment-wide count); while it
 * keeps asking, its requests are counted here and added to Redis every `syncIntervalMs` (one INCRBY per
 * client), which answers the deployment-wide count again; a client idle for a sync is forgotten. So a
 * client sending more than one request per sync interval to an instance costs one Redis command per
 * interval instead of per request, and each instance may let it through, beyond its budget, at most
 * what it sent the other instances during about one sync interval (100 ms, plus a round trip).
 * While Redis is down the counts are this instance's alone (the budget applies per instance, never
 * waiting on Redis), and they are added to Redis with the first sync after it is back.
 */
export class SharedRateCounts {
  readonly #redis: SharedRateCountsOptions['redis']
  readonly #health: SharedRateCountsOptions['health']
  readonly #keyPrefix: string
  readonly #now: () => number
  readonly #onError: (error: unknown) => void
  readonly #timer: NodeJS.Timeout
  /** Clients counted here since the last sync, in the window that is `#window` windows of `#windowMs` since the epoch. */
  #clients = new Map<string, Client>()
  #window = 0
  #windowMs = 0

  constructor (options: SharedRateCountsOptions) {
    this.#redis = options.redis
    this.#health = options.health
    this.#keyPrefix = options.keyPrefix
    this.#now = options.now ?? Date.now
    this.#onError = options.onError
    this.#timer = setInterval(() => { this.sync().catch(this.#onError) }, options.syncIntervalMs ?? 100).unref()
  }

  incr (client: string, answer: Answer, windowMs: number): void {
    const now = this.#now()
    const window = Math.floor(now / windowMs)
    const ttl = (window + 1) * windowMs - now
    if (window !== this.#window || windowMs !== this.#windowMs) {
      // Counts not yet synced belong to a window that is over: nothing will read them.
      this.#clients = new Map()
      this.#window = window
      this.#windowMs = windowMs
    }
    const known = this.#clients.get(client)
    if (known !== undefined) {
      known.pending++
      return answer(null, { current: known.shared + known.pending, ttl })
    }
    if (!this.#health.up) {
      this.#clients.set(client, { shared: 0, pending: 1 })
      return answer(null, { current: 1, ttl })
    }
    this.#add(client, 1).then((current) => {
      const counted = this.#clients.get(client)
      // Two first requests may race: the higher count is kept, and counts taken meanwhile stay pending.
      if (counted !== undefined) counted.shared = Math.max(counted.shared, current)
      else if (window === this.#window) this.#clients.set(client, { shared: current, pending: 0 })
      answer(null, { current, ttl })
    }, (error: unknown) => answer(error as Error))
  }

  /**
   * Adds the counts taken here since the last sync to Redis, and reads the deployment's back. A client
   * with no request here since the last sync is forgotten: its view would only go stale, so its next
   * request reads Redis again.
   */
  async sync (): Promise<void> {
    if (!this.#health.up) return
    const clients = this.#clients
    for (const [client, counted] of clients) if (counted.pending === 0) clients.delete(client)
    await Promise.all([...clients].map(async ([client, counted]) => {
      const sent = counted.pending
      counted.pending = 0
      try {
        counted.shared = await this.#add(client, sent)
      } catch (error) {
        // Sent again with the next sync (if the window is still on): this instance's own counts are not lost.
        counted.pending += sent
        this.#onError(error)
      }
    }))
  }

  /** Stops syncing, after adding what was counted here. */
  async close (): Promise<void> {
    clearInterval(this.#timer)
    await this.sync()
  }

  /** Per-route limits (a route's own `config.rateLimit`) would need counts of their own: none are configured. */
  child (): never {
    throw new Error('per-route rate limits are not supported by SharedRateCounts')
  }

  async #add (client: string, count: number): Promise<number> {
    const key = `${this.#keyPrefix}${client}:${this.#window}`
    const windowLeftMs = (this.#window + 1) * this.#windowMs - this.#now()
    // Sent together (auto-pipelined): one round trip. Relative, so Redis's clock does not matter.
    const [current] = await this.#health.run(async () => await Promise.all([
      this.#redis.incrby(key, count),
      this.#redis.pexpire(key, windowLeftMs + EXPIRY_SLACK_MS)
    ]))
    return current
  }
}
