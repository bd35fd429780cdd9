import type { RedisCommands } from '../redis/commands.ts'
import type { RedisHealth } from '../redis/health.ts'
import { clientLru } from './policy.ts'
import type { RateCount, RateCounts } from './rate-counts.ts'

export interface SharedRateCountsOptions {
  redis: Pick<RedisCommands, 'incrby' | 'pexpire'>
  health: Pick<RedisHealth, 'up' | 'run'>
  /** Prepended to every counter's key: `<prefix><client>:<window>`. */
  keyPrefix: string
  windowMs: number
  /** How often the counts taken here are added to Redis, and the deployment's read back. */
  syncIntervalMs?: number
  now?: () => number
  onError: (error: unknown) => void
}

interface Client {
  /** The deployment's count as Redis last answered it (until its first answer, this instance's first count). */
  shared: number
  /** Counted here since. */
  pending: number
  /** The client's first count on its way to Redis: a sync waits for it. */
  reading?: Promise<void>
}

/** A counter outlives its window by this much, so an instance whose clock is a little behind still finds it. */
const EXPIRY_SLACK_MS = 5_000

/**
 * Per-client counts every instance shares through Redis without a Redis command per request. Windows
 * are fixed and aligned to the clock, so every instance counts into the same key. No request waits for
 * Redis: a client's first request here is counted here and sent to Redis at once in the background (INCRBY,
 * which answers the deployment-wide count: a burst from one address costs one command, not one per
 * request); while it keeps asking, its requests are counted here and added to Redis every
 * `syncIntervalMs` (one INCRBY per client), which answers the deployment-wide count again; a client
 * idle for a sync leaves the syncs, its last known count kept for the window (its next request here starts from
 * it, else pacing requests a sync apart would never be refused). So each instance may let a client through, beyond its budget, at most
 * what it sent the other instances during about one sync interval (100 ms, plus a round trip), and what
 * its first request's round trip leaves unseen.
 * While Redis is down the counts are this instance's alone (the budget applies per instance, never
 * waiting on Redis), and they are added to Redis with the first sync after it is back.
 */
export class SharedRateCounts implements RateCounts {
  readonly #redis: SharedRateCountsOptions['redis']
  readonly #health: SharedRateCountsOptions['health']
  readonly #keyPrefix: string
  readonly #windowMs: number
  readonly #now: () => number
  readonly #onError: (error: unknown) => void
  readonly #timer: NodeJS.Timeout
  /** Clients counted here since the last sync, in the window that is `#window` windows of `windowMs` since the epoch. */
  #clients = new Map<string, Client>()
  /** The last deployment-wide count of clients idle since, in this window (bounded: least recently seen out first). */
  readonly #idle = clientLru<number>()
  #window = 0

  constructor (options: SharedRateCountsOptions) {
    this.#redis = options.redis
    this.#health = options.health
    this.#keyPrefix = options.keyPrefix
    this.#windowMs = options.windowMs
    this.#now = options.now ?? Date.now
    this.#onError = options.onError
    this.#timer = setInterval(() => { this.sync().catch(this.#onError) }, options.syncIntervalMs ?? 100).unref()
  }

  add (client: string, times: number, answer: (count: RateCount | undefined) => void): void {
    const now = this.#now()
    const window = Math.floor(now / this.#windowMs)
    const ttl = (window + 1) * this.#windowMs - now
    if (window !== this.#window) {
      // Counts not yet synced belong to a window that is over: nothing will read them.
      this.#clients = new Map()
      this.#idle.clear()
      this.#window = window
    }
    const known = this.#clients.get(client)
    if (known !== undefined) {
      known.pending += times
      return answer({ current: known.shared + known.pending, ttl })
    }
    const before = this.#idle.get(client) ?? 0
    this.#idle.delete(client)
    if (!this.#health.up) {
      this.#clients.set(client, { shared: before, pending: times })
      return answer({ current: before + times, ttl })
    }
    const counted: Client = { shared: before + times, pending: 0 }
    this.#clients.set(client, counted)
    answer({ current: before + times, ttl })
    counted.reading = this.#add(client, times).then((current) => {
      counted.shared = current
    }, (error: unknown) => {
      // Not counted again: a command that timed out may still have reached Redis.
      this.#onError(error)
    }).finally(() => {
      delete counted.reading
    })
  }

  /**
   * Adds the counts taken here since the last sync to Redis, and reads the deployment's back. A client
   * with no request here since the last sync leaves the syncs: only its last known count is kept.
   */
  async sync (): Promise<void> {
    if (!this.#health.up) return
    const clients = this.#clients
    // A client whose first count is still on its way syncs after it.
    for (const [client, counted] of clients) {
      if (counted.pending > 0 || counted.reading !== undefined) continue
      clients.delete(client)
      this.#idle.set(client, counted.shared)
    }
    await Promise.all([...clients].map(async ([client, counted]) => {
      await counted.reading
      const sent = counted.pending
      if (sent === 0) return
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

  async #add (client: string, count: number): Promise<number> {
    const key = `${this.#keyPrefix}${client}:${this.#window}`
    const windowLeftMs = (this.#window + 1) * this.#windowMs - this.#now()
    // Both written before either reply is awaited: one round trip. Relative, so Redis's clock does not matter.
    const [current] = await this.#health.run(async () => await Promise.all([
      this.#redis.incrby(key, count),
      this.#redis.pexpire(key, windowLeftMs + EXPIRY_SLACK_MS)
    ]))
    return current
  }
}
