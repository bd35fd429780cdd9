import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
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
