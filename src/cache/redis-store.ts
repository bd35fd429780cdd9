import type { RedisCommander } from 'ioredis'
import { CACHE_UNAVAILABLE } from '../errors.js'
import type { CacheEntry } from './cache-entry.js'
import type { RedisEvents } from './redis-events.js'
import type { CacheStore } from './store.js'

/** The commands used here: a single Redis and a Cluster both have them (every script touches one slot). */
export type StoreRedis = Pick<RedisCommander, 'hgetall' | 'eval'> & { status: string }

export interface RedisStoreOptions {
  redis: StoreRedis
  /** Tells the other instances about fills and purges. */
  events: Pick<RedisEvents, 'publish'>
  now?: () => number
}

/**
 * Stores a fill unless a newer one is there already (instances may finish loads out of order), and
 * lets Redis expire it when it can no longer be served. KEYS[1]: the entry; ARGV: status, body, etag,
 * storedAt, freshUntil, staleUntil, ttl in ms.
 */
const SET_IF_NEWER = `
local stored = redis.call('HGET', KEYS[1], 't')
if stored and tonumber(stored) > tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[1], 's', ARGV[1], 'b', ARGV[2], 'e', ARGV[3], 't', ARGV[4], 'f', ARGV[5], 'u', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
return 1`

/** Purge: fresh entries become stale as of ARGV[1]; answers how many of KEYS exist. */
const MARK_STALE = `
local found = 0
for _, key in ipairs(KEYS) do
  local fresh = redis.call('HGET', key, 'f')
  if fresh then
    if tonumber(fresh) > tonumber(ARGV[1]) then redis.call('HSET', key, 'f', ARGV[1]) end
    found = found + 1
  end
end
return found`

/**
 * Entries as Redis hashes (one HGETALL per read, the body stored as the bytes we send). Every failure,
 * including "not connected", rejects at once with CACHE_UNAVAILABLE: the client does not queue commands
 * while Redis is away, so an outage costs a caller nothing but the cache.
 */
export class RedisStore implements CacheStore {
  readonly #redis: StoreRedis
  readonly #events: RedisStoreOptions['events']
  readonly #now: () => number

  constructor (options: RedisStoreOptions) {
    this.#redis = options.redis
    this.#events = options.events
    this.#now = options.now ?? Date.now
  }

  async get (key: string): Promise<CacheEntry | undefined> {
    this.#ensureConnected()
    return decode(await this.#call(this.#redis.hgetall(key)))
  }

  async set (key: string, entry: CacheEntry): Promise<boolean> {
    const ttlMs = entry.staleUntil - this.#now()
    if (ttlMs <= 0) return false
    this.#ensureConnected()
    const { status, body, etag, storedAt, freshUntil, staleUntil } = entry
    const stored = await this.#call(this.#redis.eval(SET_IF_NEWER, 1, key, status, body, etag, storedAt, freshUntil, staleUntil, ttlMs))
    if (stored !== 1) return false
    await this.#call(this.#events.publish({ type: 'filled', key, etag }))
    return true
  }

  async markStale (keys: readonly string[], now: number): Promise<number> {
    if (keys.length === 0) return 0
    this.#ensureConnected()
    const found = await this.#call(this.#redis.eval(MARK_STALE, keys.length, ...keys, now))
    await this.#call(Promise.all(keys.map((key) => this.#events.publish({ type: 'staled', key }))))
    return Number(found)
  }

  /** The client is owned by the redis plugin, which quits it. */
  async close (): Promise<void> {}

  #ensureConnected (): void {
    if (this.#redis.status !== 'ready') throw new CACHE_UNAVAILABLE(`redis is ${this.#redis.status}`)
  }

  async #call<T> (command: Promise<T>): Promise<T> {
    try {
      return await command
    } catch (error) {
      throw new CACHE_UNAVAILABLE('a redis command failed', { cause: error })
    }
  }
}

function decode (fields: Record<string, string>): CacheEntry | undefined {
  const { s, b, e, t, f, u } = fields
  if ((s !== '200' && s !== '404') || b === undefined || e === undefined) return undefined
  const storedAt = Number(t)
  const freshUntil = Number(f)
  const staleUntil = Number(u)
  if (!Number.isFinite(storedAt + freshUntil + staleUntil)) return undefined
  return { status: s === '200' ? 200 : 404, body: b, etag: e, storedAt, freshUntil, staleUntil }
}
