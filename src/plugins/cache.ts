import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { eventsChannel } from '../cache/keys.js'
import { LocalTier } from '../cache/local-tier.js'
import { MemoryStore } from '../cache/memory-store.js'
import { RedisCoalescer } from '../cache/redis-coalescer.js'
import { RedisEvents } from '../cache/redis-events.js'
import { RedisStore } from '../cache/redis-store.js'
import type { CacheStore } from '../cache/store.js'
import { SwrCache } from '../cache/swr-cache.js'
import { Lookups } from '../lookups.js'
import { duplicateRedisClient, type RedisClient } from './redis.js'

declare module 'fastify' {
  interface FastifyInstance {
    lookups: Lookups
  }
}

export interface CachePluginOptions {
  /** The cache's clock (tests move it); default Date.now. */
  now?: () => number
}

/**
 * The in-process tier in front of Redis: a few seconds at most (a missed event, in a gap the
 * reconnection did not notice, cannot last longer), and small, since it only holds what is hot.
 */
const LOCAL_TIER = { ttlMs: 2_000, maxEntries: 1_000, maxBytes: 16 * 1024 * 1024 }

const seconds = (value: number): number => value * 1000

/** The cache in front of the upstream, and the lookups the routes call through it. */
async function cache (app: FastifyInstance, { now = Date.now }: CachePluginOptions): Promise<void> {
  const { config } = app
  const onError = (error: unknown): void => app.log.debug({ err: error }, 'redis command failed')
  const { store, coalescer } = app.redis === undefined
    ? { store: new MemoryStore({ now }), coalescer: undefined }
    : sharedCache(app, app.redis, now, onError)
  const swr = new SwrCache({
    store,
    coalescer,
    now,
    telemetry: app.telemetry,
    onError: (error, key, failure) => {
      if (failure === 'revalidate') app.log.warn({ err: error, key }, 'background revalidation failed')
      else app.log.debug({ err: error, key }, 'cache store unavailable')
    }
  })
  app.decorate('lookups', new Lookups({
    cache: swr,
    upstream: app.upstream,
    keyPrefix: config.CACHE_KEY_PREFIX,
    profile: { freshMs: seconds(config.PROFILE_TTL_SECONDS), staleMs: seconds(config.STALE_TTL_SECONDS) },
    timeline: { freshMs: seconds(config.TIMELINE_TTL_SECONDS), staleMs: seconds(config.STALE_TTL_SECONDS) },
    // A negative entry may be served stale as long again while it revalidates (after a purge, say).
    notFound: { freshMs: seconds(config.NOT_FOUND_TTL_SECONDS), staleMs: seconds(config.NOT_FOUND_TTL_SECONDS) },
    now
  }))
  app.addHook('onClose', async () => { await store.close() })
}

/** Redis behind an in-process tier, kept coherent, and loads coordinated, through one pub/sub channel. */
function sharedCache (app: FastifyInstance, redis: RedisClient, now: () => number, onError: (error: unknown) => void): {
  store: CacheStore
  coalescer: RedisCoalescer
} {
  const events = new RedisEvents({
    publisher: redis,
    subscriber: duplicateRedisClient(redis),
    channel: eventsChannel(app.config.CACHE_KEY_PREFIX),
    onError
  })
  app.addHook('onClose', async () => { await events.close() })
  const store = new LocalTier({ shared: new RedisStore({ redis, events, now }), events, now, ...LOCAL_TIER })
  // A load may take a token exchange and an upstream call, each bounded by UPSTREAM_TIMEOUT_MS.
  const lockTtlMs = 2 * app.config.UPSTREAM_TIMEOUT_MS + 1_000
  return { store, coalescer: new RedisCoalescer({ redis, events, lockTtlMs, onError }) }
}

export default fp(cache, { name: 'cache', dependencies: ['config', 'telemetry', 'redis', 'upstream'] })
