import { randomUUID } from 'node:crypto'
import type { RedisClock } from '../redis/clock.ts'
import type { RedisCommands } from '../redis/commands.ts'
import type { RedisHealth } from '../redis/health.ts'
import type { CacheEntry } from './cache-entry.ts'
import { purgeMarkKey } from './keys.ts'
import type { CacheDriver, PurgeMark } from './driver.ts'

export interface RedisDriverOptions {
  redis: Pick<RedisCommands, 'eval' | 'hgetall' | 'get'>
  health: Pick<RedisHealth, 'run'>
  /** Converts this instance's times to Redis's clock and back. */
  clock: Pick<RedisClock, 'toRedis' | 'toLocal' | 'localNow'>
  /** How long a purge is remembered for the loads that started before it: longer than a load may last. */
  purgeMemoryMs: number
}

/**
 * Stores a fill unless a newer one is there already (instances may finish loads out of order), as
 * stale if the purge mark (KEYS[2]) is no longer the one the load read when it started (a purge came
 * since: Redis orders the two, no clock does), and lets Redis expire it when it can no longer be served.
 * Stored stale is "fresh until it was stored": stale for every instance, whatever its clock. KEYS[1]:
 * the entry; ARGV: status, body, etag, storedAt, the load's purge mark ('' for none), freshUntil,
 * staleUntil (Redis's clock), ttl in ms. Answers the stored freshUntil, or false when not stored.
 */
const SET_IF_NEWER = `
local previous = redis.call('HGET', KEYS[1], 't')
if previous and tonumber(previous) > tonumber(ARGV[4]) then return false end
local freshUntil = ARGV[6]
local purged = redis.call('GET', KEYS[2])
if purged and purged ~= ARGV[5] then freshUntil = ARGV[4] end
redis.call('HSET', KEYS[1], 's', ARGV[1], 'b', ARGV[2], 'e', ARGV[3], 't', ARGV[4], 'f', freshUntil, 'u', ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[8])
return freshUntil`

/**
 * Purge: the entries become stale (fresh until they were stored), and each purge mark is replaced by
 * ARGV[1], a random id, for ARGV[2] ms (longer than a load may last), so that a load that read the
 * previous mark stores its result as stale. Not a count: one that expired would start again at a value
 * a load under way may have read. KEYS: entry, purge mark, entry, purge mark... Answers how many
 * entries exist.
 */
const MARK_STALE = `
local found = 0
for i = 1, #KEYS, 2 do
  local storedAt = redis.call('HGET', KEYS[i], 't')
  if storedAt then
    redis.call('HSET', KEYS[i], 'f', storedAt)
    found = found + 1
  end
  redis.call('SET', KEYS[i + 1], ARGV[1], 'PX', ARGV[2])
end
return found`

/**
 * Entries as Redis hashes (one HGETALL per read, the body stored as the bytes we send), their times on
 * Redis's clock, converted from and to this instance's on the way (see RedisClock). Every failure, and every
 * command while Redis is down, rejects at once with CACHE_UNAVAILABLE (see RedisHealth).
 */
export class RedisDriver implements CacheDriver {
  readonly #options: RedisDriverOptions

  constructor (options: RedisDriverOptions) {
    this.#options = options
  }

  async get (key: string): Promise<CacheEntry | undefined> {
    const { redis, health, clock } = this.#options
    return decode(await health.run(async () => await redis.hgetall(key)), clock)
  }

  async purgeMark (key: string): Promise<PurgeMark> {
    const { redis, health } = this.#options
    return await health.run(async () => await redis.get(purgeMarkKey(key))) ?? ''
  }

  async set (key: string, entry: CacheEntry, mark = ''): Promise<CacheEntry | undefined> {
    const { redis, health, clock } = this.#options
    const ttlMs = Math.floor(entry.staleUntil - clock.localNow())
    if (ttlMs <= 0) return undefined
    const { status, body, etag, storedAt, freshUntil, staleUntil } = entry
    const args = [status, body, etag, clock.toRedis(storedAt), mark, clock.toRedis(freshUntil), clock.toRedis(staleUntil), ttlMs]
    const stored = await health.run(async () => await redis.eval(SET_IF_NEWER, 2, key, purgeMarkKey(key), ...args))
    if (stored === null) return undefined
    const storedFreshUntil = clock.toLocal(Number(stored))
    return storedFreshUntil < freshUntil ? { ...entry, freshUntil: storedFreshUntil } : entry
  }

  /** No time needed: a purged entry is "fresh until stored", and loads are ordered by the purge mark. */
  async markStale (keys: readonly string[]): Promise<number> {
    if (keys.length === 0) return 0
    const { redis, health, purgeMemoryMs } = this.#options
    const pairs = keys.flatMap((key) => [key, purgeMarkKey(key)])
    return Number(await health.run(async () => await redis.eval(MARK_STALE, pairs.length, ...pairs, randomUUID(), purgeMemoryMs)))
  }
}

/** Redis's times become this instance's. */
function decode (fields: Record<string, string>, clock: Pick<RedisClock, 'toLocal'>): CacheEntry | undefined {
  const { s, b, e, t, f, u } = fields
  if ((s !== '200' && s !== '404') || b === undefined || e === undefined) return undefined
  const storedAt = Number(t)
  const freshUntil = Number(f)
  const staleUntil = Number(u)
  if (!Number.isFinite(storedAt + freshUntil + staleUntil)) return undefined
  return { status: s === '200' ? 200 : 404, body: b, etag: e, storedAt: clock.toLocal(storedAt), freshUntil: clock.toLocal(freshUntil), staleUntil: clock.toLocal(staleUntil) }
}
