import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { Redis } from 'ioredis'
import { eventsChannel } from '../cache/keys.ts'
import { RedisBus } from '../redis/bus.ts'
import { createRedisClient, duplicateRedisClient, quitOrDrop } from '../redis/client.ts'
import { RedisClock } from '../redis/clock.ts'
import { RedisHealth } from '../redis/health.ts'
import { Membership } from '../redis/membership.ts'
import type { RedisLayer } from '../redis/layer.ts'
import { OwnerLock } from '../redis/owner-lock.ts'
import { loadBudget } from '../load-budget.ts'
import { realTimers } from '../upstream/budget/schedule.ts'
import { steadyNow } from '../steady-clock.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** The Redis layer (its client, health, bus and locks), or undefined when REDIS_URL is unset (in-process cache). */
    redisLayer: RedisLayer | undefined
  }
}

interface RedisPluginOptions {
  /** This instance's clock (tests move it); default steadyNow. */
  now?: () => number
}

/** Owns the Redis layer's life: created with the app (start-up never waits for Redis), closed with it. */
async function redis (app: FastifyInstance, { now = steadyNow }: RedisPluginOptions): Promise<void> {
  const url = app.config.REDIS_URL
  if (url === undefined) {
    app.decorate('redisLayer', undefined)
    return
  }
  const client = createRedisClient(url, app.config)
  // Whether why Redis is away was said at warn since it was last up: a wrong password or a Sentinel naming no primary
  // would otherwise show only at debug, Redis never having been up to go down.
  let told = false
  // Without a listener ioredis reports connection errors as unhandled; they are expected during an outage.
  client.on('error', (err: unknown) => {
    if (told || health.up) return app.log.debug({ err }, 'redis connection error')
    told = true
    app.log.warn({ err }, 'redis unreached: serving from the in-process cache')
  })
  const onError = (err: unknown): void => app.log.debug({ err }, 'redis command failed')
  const clock = new RedisClock(now)
  const health = new RedisHealth({
    client,
    clock,
    // As ioredis read it from REDIS_URL (its path, or `?db=`); a Cluster has none.
    database: client instanceof Redis ? client.options.db ?? 0 : 0,
    onChange: (up, cause) => {
      app.telemetry.redis(up)
      told = !up
      if (up) app.log.info('redis is up: the cache is shared again')
      else app.log.warn({ err: cause }, 'redis is down: serving from the in-process cache')
    }
  })
  // Said when events that reached this instance stop: not before the first subscription, nor at its own close.
  let eventsReached = false
  let closing = false
  const bus = new RedisBus({
    publisher: client,
    health,
    subscriber: duplicateRedisClient(client),
    channel: eventsChannel(app.config.CACHE_KEY_PREFIX),
    onError,
    onChange: (ready) => {
      app.telemetry.bus.up(ready)
      if (!ready && eventsReached && !closing) app.log.info('redis events lost: copies last their 2 s bound, lock waiters look again after a lock\'s lifetime')
      eventsReached = ready
    },
    purgeTiming: { clock, observe: app.telemetry.bus.purgePropagation }
  })
  // Down until the first probe answers: an operator sees 0, not a gap, while Redis is still unreached.
  app.telemetry.redis(false)
  app.telemetry.bus.up(false)
  const lock = new OwnerLock({ redis: client, health, bus, ttlMs: loadBudget(app.config).lockTtlMs, onError })
  // Only the upstream budget counts the fleet: without UPSTREAM_MAX_RPS, no beat.
  const membership = app.config.UPSTREAM_MAX_RPS === 0
    ? undefined
    : new Membership({ redis: client, health, clock, key: `${app.config.CACHE_KEY_PREFIX}members`, now, schedule: realTimers, onError })
  membership?.start()
  app.decorate<RedisLayer>('redisLayer', { client, health, clock, bus, lock, ...(membership !== undefined && { membership }) })
  app.addHook('onClose', async () => {
    closing = true
    await membership?.close()
    health.close()
    await bus.close()
    await quitOrDrop(client)
  })
}

export default fp(redis, { name: 'redis', dependencies: ['config', 'telemetry'] })
