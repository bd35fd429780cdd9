import type { LRUCache } from 'lru-cache'
import type { RedisCommands } from '../redis/commands.ts'
import { mayHaveRun, type RedisHealth } from '../redis/health.ts'
import { clientLru, RATE_LIMIT_CLIENTS } from './policy.ts'
import type { RateCount, RateCounts } from './rate-counts.ts'
import { steadyNow } from '../steady-clock.ts'

export interface SharedRateCountsOptions {
  redis: Pick<RedisCommands, 'eval'>
  health: Pick<RedisHealth, 'up' | 'run'>
  /** The window's hash is `<prefix><window>`, a field per client. */
  keyPrefix: string
  windowMs: number
  /** How often the counts taken here are added to Redis, and the deployment's read back. */
  syncIntervalMs?: number
  /** Clients in the syncs at once, and idle clients' counts kept (each bound alone; RATE_LIMIT_CLIENTS). */
  maxClients?: number
  now?: () => number
  onError: (error: unknown) => void
}

/**
 * Adds each client's count (ARGV: client, count, client, count, ..., then the ms to keep the window) to the window's
 * hash, and answers the deployment-wide counts in the same order: one command for the clients of a sync. One key, so
 * one slot: a Cluster runs it too.
 */
export const ADD_COUNTS = `local counts = {}
for i = 1, #ARGV - 1, 2 do counts[#counts + 1] = redis.call('hincrby', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('pexpire', KEYS[1], ARGV[#ARGV])
return counts`

interface Client {
  /** The deployment's count as Redis last answered it (until its first answer, this instance's idea of it). */
  shared: number
  /** Sent to Redis, not yet answered. */
  sending: number
  /** Counted here since. */
  pending: number
}

/** A client's count on its way to Redis. */
interface Sent { client: string, counted: Client, count: number }

/** A window's hash outlives it by this much, so an instance whose clock is a little behind still finds it. */
const EXPIRY_SLACK_MS = 5_000
/** Clients per command: a script holds Redis for its whole run, so a crowd is sent in parts. */
const CLIENTS_PER_COMMAND = 500

/**
 * Per-client counts every instance shares through Redis without a Redis command per request, nor one per client.
 * Windows are fixed and aligned to the clock, and each is one hash in Redis, so every instance counts into the same
 * one. No request waits for Redis: requests are counted here, and every `syncIntervalMs` the counts of every client
 * seen since are added to Redis in one command, which answers their deployment-wide counts (a herd of new clients
 * costs one command, where a command or two each cost it more than its requests did); a client idle for a sync leaves
 * the syncs, its last known count kept for the window (its next request here starts from it, else pacing requests a
 * sync apart would never be refused). So an instance knows a client's deployment-wide count at most a sync interval
 * (100 ms) and a round trip late, from its first request here or its first after a pause, and may let it through,
 * beyond its budget, what it sends in that time. While Redis is down the counts are this instance's alone (the budget
 * applies per instance, never waiting on Redis), and they are added to Redis with the first sync after it is back; a
 * sync that fails before reaching Redis keeps its counts for the next one, and one that may have reached it (a
 * timeout) does not: a count doubled would refuse a client early, one lost lets it through a little more. While no sync
 * takes clients out (Redis down), past `maxClients` the client first seen longest ago leaves them: its count is kept
 * here as an idle one's, and what it had not sent never reaches the other instances.
 */
export class SharedRateCounts implements RateCounts {
  readonly #redis: SharedRateCountsOptions['redis']
  readonly #health: SharedRateCountsOptions['health']
  readonly #keyPrefix: string
  readonly #windowMs: number
  readonly #maxClients: number
  readonly #now: () => number
  readonly #onError: (error: unknown) => void
  readonly #timer: NodeJS.Timeout
  /** Clients counted here since the last sync, in the window that is `#window` windows of `windowMs` since the epoch. */
  #clients = new Map<string, Client>()
  /** Walks `#clients` from the client first seen: one iterator, kept, since a new one walks past every slot deleted before it. */
  #oldest: MapIterator<[string, Client]> | undefined
  /** The last deployment-wide count of clients idle since, in this window (bounded: least recently seen out first). */
  readonly #idle: LRUCache<string, number>
  #window = 0

  constructor (options: SharedRateCountsOptions) {
    this.#redis = options.redis
    this.#health = options.health
    this.#keyPrefix = options.keyPrefix
    this.#windowMs = options.windowMs
    this.#maxClients = options.maxClients ?? RATE_LIMIT_CLIENTS
    this.#idle = clientLru<number>(this.#maxClients)
    this.#now = options.now ?? steadyNow
    this.#onError = options.onError
    this.#timer = setInterval(() => { this.sync().catch(this.#onError) }, options.syncIntervalMs ?? 100).unref()
  }

  add (client: string, times: number): RateCount {
    const now = this.#now()
    const window = this.#enter(now)
    const ttl = (window + 1) * this.#windowMs - now
    const known = this.#clients.get(client)
    if (known !== undefined) {
      known.pending += times
      return { current: known.shared + known.sending + known.pending, ttl }
    }
    // Its idle count taken before another client's joins the idle ones (which could push it out).
    const before = this.#idle.get(client) ?? 0
    this.#idle.delete(client)
    if (this.#clients.size >= this.#maxClients) this.#idleOldest()
    this.#clients.set(client, { shared: before, sending: 0, pending: times })
    return { current: before + times, ttl }
  }

  /**
   * Adds the counts taken here since the last sync to Redis, and reads the deployment's back. A client
   * with no request here since the last sync leaves the syncs: only its last known count is kept.
   */
  async sync (): Promise<void> {
    if (!this.#health.up) return
    this.#enter(this.#now())
    const due: Sent[] = []
    for (const [client, counted] of this.#clients) {
      if (counted.pending > 0) due.push({ client, counted, count: counted.pending })
      else if (counted.sending === 0) {
        this.#clients.delete(client)
        this.#idle.set(client, counted.shared)
      }
    }
    const sends = []
    for (let start = 0; start < due.length; start += CLIENTS_PER_COMMAND) {
      sends.push(this.#send(due.slice(start, start + CLIENTS_PER_COMMAND)))
    }
    await Promise.all(sends)
  }

  /** Stops syncing, after adding what was counted here. */
  async close (): Promise<void> {
    clearInterval(this.#timer)
    await this.sync()
  }

  /** The window `now` is in; entering a new one forgets the last (a client of an ended window touched later is no longer held). */
  #enter (now: number): number {
    const window = Math.floor(now / this.#windowMs)
    if (window !== this.#window) {
      // Counts not yet synced belong to a window that is over: nothing will read them.
      this.#clients = new Map()
      this.#oldest = undefined
      this.#idle.clear()
      this.#window = window
    }
    return window
  }

  /** The client first seen longest ago (a Map keeps insertion order) leaves the syncs, its count kept as an idle one's. */
  #idleOldest (): void {
    let next = this.#oldest?.next()
    if (next === undefined || next.done === true) {
      // Past the last client it had seen: a new walk, from the first one now.
      this.#oldest = this.#clients.entries()
      next = this.#oldest.next()
    }
    if (next.done === true) return
    const [client, counted] = next.value
    this.#clients.delete(client)
    this.#idle.set(client, counted.shared + counted.sending + counted.pending)
  }

  /** One command: the clients' counts not yet sent added to the window's hash, and their deployment-wide counts read back. */
  async #send (clients: Sent[]): Promise<void> {
    for (const { counted, count } of clients) {
      counted.sending += count
      counted.pending -= count
    }
    // Relative expiry, so Redis's clock does not matter.
    const keepMs = Math.ceil((this.#window + 1) * this.#windowMs - this.#now() + EXPIRY_SLACK_MS)
    const key = `${this.#keyPrefix}${this.#window}`
    try {
      const counts = await this.#health.run(async () =>
        await this.#redis.eval(ADD_COUNTS, 1, key, ...clients.flatMap(({ client, count }) => [client, count]), keepMs)) as number[]
      clients.forEach(({ counted, count }, index) => {
        counted.sending -= count
        // Counts only grow within a window: an older answer read late never takes one back.
        counted.shared = Math.max(counted.shared, Number(counts[index]))
      })
    } catch (error) {
      // Sent again with the next sync; unless Redis may have added it already, then counted as added.
      const added = mayHaveRun(error)
      for (const { counted, count } of clients) {
        counted.sending -= count
        if (added) counted.shared += count
        else counted.pending += count
      }
      this.#onError(error)
    }
  }
}
