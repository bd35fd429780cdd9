import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { CACHE_UNAVAILABLE } from '../../src/errors.js'
import type { RedisLayer } from '../../src/redis/layer.js'
import { RedisBus } from '../../src/redis/bus.js'
import { RedisClock } from '../../src/redis/clock.js'
import { RedisHealth } from '../../src/redis/health.js'
import { OwnerLock } from '../../src/redis/owner-lock.js'
import type { TestContext } from '../helper.js'

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

/** A client on the shared test Redis and a key prefix nobody else uses; both cleaned up with the test. */
export function testRedis (t: TestContext): { redis: Redis, prefix: string } {
  const redis = new Redis(REDIS_URL)
  const prefix = `pbff-test:${randomUUID()}:`
  t.teardown(async () => {
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length > 0) await redis.del(...keys)
    await redis.quit()
  })
  return { redis, prefix }
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
 * subscribed; or, on a dead Redis, one that never comes up. Closed with the test.
 */
export async function testLayer (t: TestContext, redis: Redis, prefix: string, lockTtlMs = 1_000): Promise<RedisLayer> {
  const clock = new RedisClock(Date.now)
  const health = new RedisHealth({ client: redis, clock })
  const subscriber = redis.duplicate()
  subscriber.on('error', () => {})
  const bus = new RedisBus({ publisher: redis, health, subscriber, channel: `${prefix}events`, onError: () => {} })
  const lock = new OwnerLock({ redis, health, bus, ttlMs: lockTtlMs, onError: () => {} })
  t.teardown(async () => {
    health.close()
    await bus.close()
  })
  if (redis.options.port !== 1) await until(() => bus.ready, 'redis layer up')
  return { client: redis, health, clock, bus, lock }
}

async function until (check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${what}`)
    await sleep(10)
  }
}
