import type { RedisBus } from '../redis/bus.js'
import type { RedisCommands } from '../redis/commands.js'
import type { RedisHealth } from '../redis/health.js'
import type { CacheEntry } from './cache-entry.js'
import { purgedKey } from './keys.js'
import type { CacheStore } from './store.js'

export interface RedisStoreOptions {
  redis: Pick<RedisCommands, 'eval'>
  health: Pick<RedisHealth, 'run'>
  /** Tells the other instances about fills and purges. */
  events: Pick<RedisBus, 'publish'>
  /** How long a purge is remembered for the loads that started before it: longer than a load may last. */
  purgeMemoryMs: number
  now?: () => number
}

/** Redis's clock in ms: every time stored or compared here is Redis's, so instances' clocks need not agree. */
const NOW = `local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
`

/** The entry's fields and Redis's time, for the caller to convert to its own clock. */
const GET = `${NOW}return { now, redis.call('HMGET', KEYS[1], 's', 'b', 'e', 't', 'f', 'u') }`

/**
 * Stores a fill unless a newer one is there already (instances may finish loads out of order), as
 * stale if a purge (KEYS[2]) came after the load started, and lets Redis expire it when it can no
 * longer be served. KEYS[1]: the entry; ARGV: status, body, etag, then ages and times left in ms:
 * since stored, since the load started, freshness left, servable left. Answers the stored freshness
 * left (negative: stored stale), or false when not stored.
 */
const SET_IF_NEWER = `${NOW}
local storedAt = now - tonumber(ARGV[4])
local previous = redis.call('HGET', KEYS[1], 't')
if previous and tonumber(previous) > storedAt then return false end
local freshUntil = now + tonumber(ARGV[6])
local purged = redis.call('GET', KEYS[2])
if purged and tonumber(purged) >= now - tonumber(ARGV[5]) then freshUntil = math.min(freshUntil, tonumber(purged)) end
redis.call('HSET', KEYS[1], 's', ARGV[1], 'b', ARGV[2], 'e', ARGV[3], 't', storedAt, 'f', freshUntil, 'u', now + tonumber(ARGV[7]))
redis.call('PEXPIRE', KEYS[1], ARGV[7])
return { freshUntil - now }`

/**
 * Purge: fresh entries become stale now, and the purge is remembered so that a load already under way
 * stores its result as stale. KEYS: entry, purge mark, entry, purge mark...; ARGV[1]: the mark's
 * lifetime. Answers how many entries exist.
 */
const MARK_STALE = `${NOW}
local found = 0
for i = 1, #KEYS, 2 do
  local fresh = redis.call('HGET', KEYS[i], 'f')
  if fresh then
    if tonumber(fresh) > now then redis.call('HSET', KEYS[i], 'f', now) end
    found = found + 1
  end
  redis.call('SET', KEYS[i + 1], now, 'PX', ARGV[1])
end
return found`

/**
 * Entries as Redis hashes (one script per read, the body stored as the bytes we send), their times on
 * Redis's clock and converted to this instance's on the way in and out. Every failure, and every
 * command while Redis is down, rejects at once with CACHE_UNAVAILABLE (see RedisHealth).
 */
export class RedisStore implements CacheStore {
  readonly #options: RedisStoreOptions
  readonly #now: () => number

  constructor (options: RedisStoreOptions) {
    this.#options = options
    this.#now = options.now ?? Date.now
  }

  async get (key: string): Promise<CacheEntry | undefined> {
    const { redis, health } = this.#options
    const reply = await health.run(async () => await redis.eval(GET, 1, key))
    return decode(reply, this.#now())
  }

  async set (key: string, entry: CacheEntry, loadStartedAt = entry.storedAt): Promise<CacheEntry | undefined> {
    const now = this.#now()
    const staleLeftMs = Math.floor(entry.staleUntil - now)
    if (staleLeftMs <= 0) return undefined
    const { redis, health, events } = this.#options
    const { status, body, etag } = entry
    const ages = [now - entry.storedAt, now - Math.min(loadStartedAt, entry.storedAt)].map((ms) => Math.max(0, Math.round(ms)))
    const reply = await health.run(async () =>
      await redis.eval(SET_IF_NEWER, 2, key, purgedKey(key), status, body, etag, ...ages, Math.floor(entry.freshUntil - now), staleLeftMs))
    if (!Array.isArray(reply)) return undefined
    // Stored is stored: a lost event costs the others' copies at most their few seconds.
    await events.publish({ type: 'filled', key, etag }).catch(() => {})
    const freshLeftMs = Number(reply[0])
    return freshLeftMs >= entry.freshUntil - now ? entry : { ...entry, freshUntil: now + freshLeftMs }
  }

  async markStale (keys: readonly string[]): Promise<number> {
    if (keys.length === 0) return 0
    const { redis, health, events, purgeMemoryMs } = this.#options
    const pairs = keys.flatMap((key) => [key, purgedKey(key)])
    const found = await health.run(async () => await redis.eval(MARK_STALE, pairs.length, ...pairs, purgeMemoryMs))
    await Promise.all(keys.map(async (key) => await events.publish({ type: 'staled', key })))
    return Number(found)
  }

  /** The client is owned by the redis plugin, which quits it. */
  async close (): Promise<void> {}
}

/** Redis's times become this instance's: what is left of freshness, say, is the same on both clocks. */
function decode (reply: unknown, localNow: number): CacheEntry | undefined {
  if (!Array.isArray(reply) || !Array.isArray(reply[1])) return undefined
  const offset = localNow - Number(reply[0])
  const [s, b, e, t, f, u] = reply[1] as Array<string | null>
  if ((s !== '200' && s !== '404') || typeof b !== 'string' || typeof e !== 'string') return undefined
  if (typeof t !== 'string' || typeof f !== 'string' || typeof u !== 'string') return undefined
  const storedAt = Number(t) + offset
  const freshUntil = Number(f) + offset
  const staleUntil = Number(u) + offset
  if (!Number.isFinite(storedAt + freshUntil + staleUntil)) return undefined
  return { status: s === '200' ? 200 : 404, body: b, etag: e, storedAt, freshUntil, staleUntil }
}
