import { randomUUID } from 'node:crypto'
import type { RedisBus } from '../redis/bus.ts'
import type { RedisClock } from '../redis/clock.ts'
import type { RedisClient } from '../redis/client.ts'
import type { RedisCommands } from '../redis/commands.ts'
import type { RedisHealth } from '../redis/health.ts'
import type { Claim, HeldLock, OwnerLock } from '../redis/owner-lock.ts'
import type { CacheEntry } from './cache-entry.ts'
import { CACHE_UNAVAILABLE } from '../errors.ts'
import { purgeMarkKey, retryMarkKey } from './keys.ts'
import type { CacheDriver, ClaimedLoad, PurgeMark } from './driver.ts'
import { CLAIM_UNLESS_HELD, HOLD_BACK, READ_OR_CLAIM, SET_IF_NEWER } from './redis-scripts.ts'
import { HeldBack } from './revalidation-holds.ts'

export interface RedisDriverOptions {
  redis: Pick<RedisCommands, 'eval' | 'hgetall' | 'get'> & Pick<RedisClient, 'pipeline'>
  health: Pick<RedisHealth, 'run'>
  /** Converts this instance's times to Redis's clock and back. */
  clock: Pick<RedisClock, 'toRedis' | 'toLocal' | 'localNow'>
  /** How long a purge is remembered for the loads that started before it: longer than a load may last. */
  purgeMemoryMs: number
  /**
   * With both, a read that finds nothing servable claims the key's load (`getOrClaim`), and a fill is published and
   * its lock released by the write's own script: a cold miss waits for one round trip before its call and one after.
   */
  lock?: Pick<OwnerLock, 'claimBy'>
  bus?: Pick<RedisBus, 'channel' | 'message'>
  /** Redis fails over to a replica (Sentinel): a purge waits for one even while none is online, which may still be promoted. */
  failsOver?: boolean
}

/**
 * Purge: the entries become stale (fresh until they were stored), and each purge mark is replaced by
 * ARGV[1], a random id, for ARGV[2] ms (longer than a load may last), so that a load that read the
 * previous mark stores its result as stale. Not a count: one that expired would start again at a value
 * a load under way may have read. A failed revalidation's hold goes too: a purge asks for a load. KEYS: entry, purge
 * mark, hold, entry... With ARGV[3] (a channel), ARGV[4...] are published there, one per entry (in the same round trip:
 * the other instances hear of it sooner).
 * Answers how many entries exist, and how many replicas are online (their purge is waited for: see markStale).
 */
const MARK_STALE = `
local found = 0
for i = 1, #KEYS, 3 do
  local storedAt = redis.call('HGET', KEYS[i], 't')
  if storedAt then
    redis.call('HSET', KEYS[i], 'f', storedAt)
    found = found + 1
  end
  redis.call('SET', KEYS[i + 1], ARGV[1], 'PX', ARGV[2])
  redis.call('DEL', KEYS[i + 2])
  if ARGV[3] ~= '' then redis.call('PUBLISH', ARGV[3], ARGV[3 + (i + 2) / 3]) end
end
local _, replicas = string.gsub(redis.call('INFO', 'replication'), 'state=online', '')
return {found, replicas}`

/** How long past its end Redis keeps a hold: compared by its value, its TTL only tidies (a clock behind Redis's still finds it). */
const HOLD_TIDY_MS = 60_000

/** How long a purge waits for a replica's acknowledgement: well within RedisHealth's 500 ms bound on a command. */
const REPLICA_WAIT_MS = 250

/**
 * Entries as Redis hashes (one HGETALL per read, the body stored as the bytes we send), their times on
 * Redis's clock, converted from and to this instance's on the way (see RedisClock). Every failure, and every
 * command while Redis is down, rejects at once with CACHE_UNAVAILABLE (see RedisHealth).
 */
export class RedisDriver implements CacheDriver {
  readonly #options: RedisDriverOptions
  readonly announcesFills: boolean
  readonly getOrClaim?: (key: string) => Promise<{ entry: CacheEntry | undefined, claimed?: ClaimedLoad }>
  readonly claimUnlessHeld?: (key: string) => Promise<Claim | undefined>

  constructor (options: RedisDriverOptions) {
    this.#options = options
    this.announcesFills = options.bus !== undefined
    const { lock } = options
    if (lock !== undefined && this.announcesFills) this.getOrClaim = async (key) => await this.#getOrClaim(key, lock)
    if (lock !== undefined) this.claimUnlessHeld = async (key) => await this.#claimUnlessHeld(key, lock)
  }

  /** One script: the lock, unless a failed revalidation's hold lasts (then HeldBack, with what is left of it). */
  async #claimUnlessHeld (key: string, lock: Pick<OwnerLock, 'claimBy'>): Promise<Claim | undefined> {
    const { redis, health, clock } = this.#options
    return await lock.claimBy(key, async (lockKey, token, ttlMs) => {
      const now = clock.toRedis(clock.localNow())
      const reply = Number(await health.run(async () => await redis.eval(CLAIM_UNLESS_HELD, 2, lockKey, retryMarkKey(key), token, ttlMs, now)))
      if (reply < 0) throw new HeldBack(-reply)
      return reply === 1
    })
  }

  /** Arrow: handed around without its object (see sharedHolds). */
  readonly holdBack = async (key: string, ms: number, mark: PurgeMark, lock?: HeldLock): Promise<void> => {
    const { redis, health, bus, clock } = this.#options
    // Without the bus, the lock is released by its owner (OwnerLock), as after a fill.
    const held = bus === undefined ? undefined : lock
    const told = held === undefined || bus === undefined ? ['', '', ''] : [held.token, bus.channel, bus.message({ type: 'released', key })]
    // Its end on Redis's clock, as the entries' times: one clock for every instance. The TTL only tidies, a minute late.
    const until = clock.toRedis(clock.localNow() + ms)
    const args = [until, Math.ceil(ms) + HOLD_TIDY_MS, mark, ...told]
    await health.run(async () => await redis.eval(HOLD_BACK, 3, retryMarkKey(key), purgeMarkKey(key), held?.key ?? key, ...args))
    held?.released()
  }

  async get (key: string): Promise<CacheEntry | undefined> {
    const { redis, health, clock } = this.#options
    return decode(await health.run(async () => await redis.hgetall(key)), clock)
  }

  /** One script: the entry; when nothing servable is there, the purge mark and the load's lock too. */
  async #getOrClaim (key: string, lock: Pick<OwnerLock, 'claimBy'>): Promise<{ entry: CacheEntry | undefined, claimed?: ClaimedLoad }> {
    const { redis, health, clock } = this.#options
    let fields: Record<string, string> = {}
    let mark: PurgeMark = ''
    const claim = await lock.claimBy(key, async (lockKey, token, ttlMs) => {
      const now = clock.toRedis(clock.localNow())
      const reply = await health.run(async () => await redis.eval(READ_OR_CLAIM, 3, key, purgeMarkKey(key), lockKey, now, token, ttlMs)) as [string[], string?, number?]
      fields = pairs(reply[0])
      mark = reply[1] ?? ''
      return reply[2] === undefined ? undefined : reply[2] === 1
    })
    const entry = decode(fields, clock)
    return claim === undefined ? { entry } : { entry, claimed: { claim, mark } }
  }

  async purgeMark (key: string): Promise<PurgeMark> {
    const { redis, health } = this.#options
    return await health.run(async () => await redis.get(purgeMarkKey(key))) ?? ''
  }

  async set (key: string, entry: CacheEntry, mark = '', lock?: HeldLock): Promise<CacheEntry | undefined> {
    const { redis, health, clock, bus } = this.#options
    const ttlMs = Math.floor(entry.staleUntil - clock.localNow())
    if (ttlMs <= 0) return undefined
    const { status, body, etag, storedAt, freshUntil, staleUntil } = entry
    const args = [status, body, etag, clock.toRedis(storedAt), mark, clock.toRedis(freshUntil), clock.toRedis(staleUntil), ttlMs]
    // Without the bus, the fill is told and the lock released by their owners (SharedTier, OwnerLock).
    const held = bus === undefined ? undefined : lock
    const told = bus === undefined
      ? ['', '', '', '']
      : [held?.token ?? '', bus.channel, bus.message({ type: 'filled', key, etag }), bus.message({ type: 'released', key })]
    // Without a lock the script leaves KEYS[3] alone: the entry's key stands in for it (same slot).
    const stored = await health.run(async () => await redis.eval(SET_IF_NEWER, 3, key, purgeMarkKey(key), held?.key ?? key, ...args, ...told))
    held?.released()
    if (stored === null) return undefined
    const storedFreshUntil = clock.toLocal(Number(stored))
    return storedFreshUntil < freshUntil ? { ...entry, freshUntil: storedFreshUntil } : entry
  }

  /**
   * No time needed: a purged entry is "fresh until stored", and loads are ordered by the purge mark. Told to the other
   * instances by the script where there is a bus. Replication is asynchronous: where the node has replicas online, the
   * purge waits for one to acknowledge it (WAIT), so that a purge answered 200 survives a failover; when none does in
   * time it is applied and told, but rejects (CACHE_UNAVAILABLE: a 503 the operator retries, a purge being idempotent).
   */
  async markStale (keys: readonly string[]): Promise<number> {
    if (keys.length === 0) return 0
    const { redis, health, purgeMemoryMs, bus } = this.#options
    const pairs = keys.flatMap((key) => [key, purgeMarkKey(key), retryMarkKey(key)])
    const told = bus === undefined ? [''] : [bus.channel, ...keys.map((key) => bus.message({ type: 'staled', key }))]
    const [found, replicas] = await health.run(async () => await redis.eval(MARK_STALE, pairs.length, ...pairs, randomUUID(), purgeMemoryMs, ...told)) as [number, number]
    if ((replicas > 0 || this.#options.failsOver === true) && await this.#replicated(pairs[1] as string) === 0) {
      throw new CACHE_UNAVAILABLE(`no replica acknowledged the purge within ${REPLICA_WAIT_MS} ms`)
    }
    return found
  }

  /** WAIT behind a read of `key`, which sends it to the node that ran the purge (a Cluster routes a keyless command anywhere). */
  async #replicated (key: string): Promise<number> {
    const { redis, health } = this.#options
    const replies = await health.run(async () => await redis.pipeline().pttl(key).wait(1, REPLICA_WAIT_MS).exec())
    const [error, acknowledged] = replies?.[1] ?? [new Error('no reply to WAIT')]
    if (error !== null) throw new CACHE_UNAVAILABLE('WAIT failed', { cause: error })
    return Number(acknowledged)
  }
}

/** HGETALL's flat reply, as the record ioredis makes of it. */
function pairs (flat: string[]): Record<string, string> {
  const fields: Record<string, string> = {}
  for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i] as string] = flat[i + 1] as string
  return fields
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
