import { randomUUID } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { Cluster, Redis } from 'ioredis'
import type { Config } from '../../src/config.ts'
import { CACHE_UNAVAILABLE } from '../../src/errors.ts'
import type { RedisLayer } from '../../src/redis/layer.ts'
import { RedisBus } from '../../src/redis/bus.ts'
import { REDIS_OPTIONS } from '../../src/redis/client.ts'
import { RedisClock } from '../../src/redis/clock.ts'
import { RedisHealth } from '../../src/redis/health.ts'
import { OwnerLock } from '../../src/redis/owner-lock.ts'
import { eventually, type TestContext } from './clock.ts'
import { TokenCipher } from '../../src/upstream/token-cipher.ts'
import { sharedTokenKey } from '../../src/upstream/token-store.ts'

/** The Redis every test shares (each under a key prefix of its own). */
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

/** A key prefix nobody else uses, whose keys on the shared Redis are deleted with the test. */
export function testPrefix (t: TestContext): string {
  const prefix = `pbff-test:${randomUUID()}:`
  t.teardown(async () => await deleteKeys(prefix))
  return prefix
}

/** Deletes the keys under `prefix` on the shared Redis (tests leave nothing behind). */
export async function deleteKeys (prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 })
  try {
    for await (const keys of redis.scanStream({ match: `${prefix}*`, count: 1000 }) as AsyncIterable<string[]>) {
      if (keys.length > 0) await redis.unlink(...keys)
    }
  } finally {
    await redis.quit()
  }
}

/** A client on the shared Redis and a key prefix nobody else uses; both cleaned up with the test. */
export function testRedis (t: TestContext): { redis: Redis, prefix: string } {
  const prefix = testPrefix(t)
  return { redis: rawRedis(t), prefix }
}

/** A raw client (by default on the shared Redis), for looking at keys; quit with the test. */
export function rawRedis (t: TestContext, url = REDIS_URL): Redis {
  const redis = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 1 })
  t.teardown(() => redis.quit().catch(() => redis.disconnect()))
  return redis
}

/** A client whose Redis is not there: every command fails at once, as during an outage. */
export function deadRedis (t: TestContext): Redis {
  const redis = new Redis({ port: 1, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null })
  redis.on('error', () => {})
  t.teardown(() => redis.disconnect())
  return redis
}

/** A health state the test sets: `run` sends the command while `up`, and rejects at once otherwise. */
export function fakeHealth (up = true): Pick<RedisHealth, 'run'> & { up: boolean } {
  const health = {
    up,
    run: async <T>(command: () => Promise<T>): Promise<T> => {
      if (!health.up) throw new CACHE_UNAVAILABLE('redis is down')
      return await command()
    }
  }
  return health
}

/**
 * One instance's Redis layer on `redis` (its own health, bus subscription and lock), once it is up and
 * subscribed; or, on a dead Redis, one that never comes up. Closed with the test. `commandTimeoutMs` is the
 * health's bound on a command (the service's 500 ms by default).
 */
export async function testLayer (t: TestContext, redis: Redis, prefix: string, lockTtlMs = 1_000, commandTimeoutMs?: number): Promise<RedisLayer> {
  const clock = new RedisClock(Date.now)
  const health = new RedisHealth({ client: redis, clock, ...(commandTimeoutMs !== undefined && { commandTimeoutMs }) })
  const subscriber = redis.duplicate()
  subscriber.on('error', () => {})
  const bus = new RedisBus({ publisher: redis, health, subscriber, channel: `${prefix}events`, onError: () => {} })
  const lock = new OwnerLock({ redis, health, bus, ttlMs: lockTtlMs, onError: () => {} })
  t.teardown(async () => {
    health.close()
    await bus.close()
  })
  if (redis.options.port !== 1) await eventually(() => bus.ready, 'redis layer up')
  return { client: redis, health, clock, bus, lock }
}

/**
 * Start-up never waits for Redis; a test that means to use it does: until Redis is up and the
 * deployment's channel has `instances` subscribers (each instance subscribes once it is connected).
 */
export async function untilRedisReady (app: FastifyInstance, instances = 1): Promise<void> {
  const redis = app.redisLayer?.client
  if (redis === undefined) return
  await eventually(() => app.redisLayer?.health.up === true, 'redis up')
  const channel = `${app.config.CACHE_KEY_PREFIX}v1:events`
  // On a cluster each node counts its own subscribers.
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis]
  await eventually(async () => {
    // The app's client refuses commands for a moment while it reconnects (no offline queue): not subscribed yet.
    const counts = await Promise.all(nodes.map(async (node) => (await node.pubsub('NUMSUB', channel) as [string, number])[1])).catch(() => [0])
    return counts.reduce((sum, count) => sum + count, 0) >= instances
  }, 'subscribed')
}

/** One instance's view of the shared Redis: a command client, its health and its events channel, connected and subscribed. */
export async function busInstance (t: TestContext, channel: string): Promise<{ redis: Redis, health: RedisHealth, events: RedisBus }> {
  const redis = new Redis(REDIS_URL, REDIS_OPTIONS)
  const health = new RedisHealth({ client: redis, clock: new RedisClock(Date.now) })
  const events = new RedisBus({ publisher: redis, health, subscriber: redis.duplicate(), channel, onError: () => {} })
  t.teardown(async () => {
    health.close()
    await events.close()
    await redis.quit()
  })
  await eventually(() => events.ready && health.up, 'connected and subscribed')
  return { redis, health, events }
}

/** The key of the deployment's shared token (its lock and failure window are named after it), as `config`'s instances name it. */
export function tokenKeyOf (config: Pick<Config, 'CACHE_KEY_PREFIX' | 'CLIENT_SECRET'>): string {
  return sharedTokenKey(config.CACHE_KEY_PREFIX, new TokenCipher(config.CLIENT_SECRET))
}

/**
 * The instances take the first one's estimate of Redis's clock, `aheadMs` ahead for the others, as running clocks agree
 * within a millisecond or two (test/redis/health.ts): a test's clock stands still while Redis's runs, so each would be
 * off by the real time between their connections (a loaded machine put 200 ms between three).
 */
export function oneRedisClock (apps: readonly FastifyInstance[], now: number, aheadMs = 0): void {
  const first = apps[0]?.redisLayer?.clock
  if (first === undefined) return
  const redisNow = Math.round(now - first.toLocal(0)) + aheadMs
  const time: [string, string] = [String(Math.floor(redisNow / 1000)), String((redisNow % 1000) * 1000)]
  for (const app of apps.slice(1)) app.redisLayer?.clock.sync(time, now, now)
}
