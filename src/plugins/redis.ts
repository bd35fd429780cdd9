import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { eventsChannel } from '../cache/keys.ts'
import { RedisBus } from '../redis/bus.ts'
import { createRedisClient, duplicateRedisClient, type RedisClient } from '../redis/client.ts'
import { RedisClock } from '../redis/clock.ts'
import { RedisHealth } from '../redis/health.ts'
import type { RedisLayer } from '../redis/layer.ts'
import { OwnerLock } from '../redis/owner-lock.ts'
import { loadBudget } from '../load-budget.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** The shared Redis client, or undefined when REDIS_URL is unset (in-process cache). */
    redis: RedisClient | undefined
    /** The Redis layer built on it, or undefined when REDIS_URL is unset. */
    redisLayer: RedisLayer | undefined
  }
}

interface RedisPluginOptions {
  /** This instance's clock (tests move it); default Date.now. */
  now?: () => number
}

/** Owns the Redis layer's life: created with the app (start-up never waits for Redis), closed with it. */
async function redis (app: FastifyInstance, { now = Date.now }: RedisPluginOptions): Promise<void> {
  const url = app.config.REDIS_URL
  if (url === undefined) {
    app.decorate('redis', undefined)
    app.decorate('redisLayer', undefined)
    return
  }
  const client = createRedisClient(url, app.config.REDIS_CLUSTER)
  // Without a listener ioredis reports connection errors as unhandled; they are expected during an outage.
  client.on('error', (err: unknown) => app.log.debug({ err }, 'redis connection error'))
  const onError = (err: unknown): void => app.log.debug({ err }, 'redis command failed')
  const clock = new RedisClock(now)
  const health = new RedisHealth({
    client,
    clock,
    onChange: (up, cause) => {
      app.telemetry.redis(up)
      if (up) app.log.info('redis is up: the cache is shared again')
      else app.log.warn({ err: cause }, 'redis is down: serving from the in-process cache')
    }
  })
  const bus = new RedisBus({
    publisher: client,
    health,
    subscriber: duplicateRedisClient(client),
    channel: eventsChannel(app.config.CACHE_KEY_PREFIX),
    onError
  })
  // Down until the first probe answers: an operator sees 0, not a gap, while Redis is still unreached.
  app.telemetry.redis(false)
  const lock = new OwnerLock({ redis: client, health, bus, ttlMs: loadBudget(app.config).lockTtlMs, onError })
  app.decorate<RedisClient>('redis', client)
  app.decorate<RedisLayer>('redisLayer', { client, health, clock, bus, lock })
  app.addHook('onClose', async () => {
    health.close()
    await bus.close()
    await client.quit().catch(() => client.disconnect())
  })
}

export default fp(redis, { name: 'redis', dependencies: ['config', 'telemetry'] })
