import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { LocalTier } from '../cache/local-tier.js'
import { DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES, MemoryStore } from '../cache/memory-store.js'
import { RedisStore } from '../cache/redis-store.js'
import type { CacheStore } from '../cache/store.js'
import { SwrCache, type SwrCacheOptions } from '../cache/swr-cache.js'
import { Lookups } from '../lookups/lookups.js'
import { LOCK_TTL_MS, type RedisLayer } from './redis.js'

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
 * The in-process tier in front of Redis: copies last a few seconds at most (a missed event, in a gap
 * the reconnection did not notice, cannot last longer), and few, since they only hold what is hot.
 * While Redis is away it holds as much as the embedded store does without Redis.
 */
const LOCAL_TIER = {
  ttlMs: 2_000,
  maxEntries: 1_000,
  maxBytes: 16 * 1024 * 1024,
  alone: { maxEntries: DEFAULT_MAX_ENTRIES, maxBytes: DEFAULT_MAX_BYTES }
}

const seconds = (value: number): number => value * 1000

/** The cache in front of the upstream, and the lookups the routes call through it. */
async function cache (app: FastifyInstance, { now = Date.now }: CachePluginOptions): Promise<void> {
  const { config } = app
  // A load may take a token exchange and an upstream call, each bounded by UPSTREAM_TIMEOUT_MS.
  const loadBoundMs = 2 * config.UPSTREAM_TIMEOUT_MS + 1_000
  // A purge is remembered as long as a load that started before it may still be storing.
  const purgeMemoryMs = 2 * loadBoundMs
  const { store, coalescer } = app.redisLayer === undefined
    ? { store: new MemoryStore({ now, purgeMemoryMs }), coalescer: undefined }
    : sharedCache(app.redisLayer, now, purgeMemoryMs, loadBoundMs)
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

/** Redis behind an in-process tier, kept coherent, and loads coordinated, through the Redis layer's bus and lock. */
function sharedCache ({ client, health, clock, bus, lock }: RedisLayer, now: () => number, purgeMemoryMs: number, loadBoundMs: number): {
  store: CacheStore
  coalescer: NonNullable<SwrCacheOptions['coalescer']>
} {
  const shared = new RedisStore({ redis: client, health, clock, events: bus, purgeMemoryMs })
  const store = new LocalTier({ shared, events: bus, now, purgeMemoryMs, ...LOCAL_TIER })
  // The owner renews its lock while it loads: a waiter looks again after each lifetime, up to the load's bound.
  return { store, coalescer: { claim: async (key) => await lock.claim(key), maxClaims: Math.ceil(loadBoundMs / LOCK_TTL_MS) } }
}

export default fp(cache, { name: 'cache', dependencies: ['config', 'telemetry', 'redis', 'upstream'] })
