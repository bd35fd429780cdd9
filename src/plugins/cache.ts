import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { loadBoundMs, purgeMemoryMs } from '../cache/load-bound.ts'
import { LocalTier } from '../cache/local-tier.ts'
import { MemoryStore } from '../cache/memory-store.ts'
import { RedisStore } from '../cache/redis-store.ts'
import type { CacheStore } from '../cache/store.ts'
import { SwrCache, type SwrCacheOptions } from '../cache/swr-cache.ts'
import { freshnessPolicy } from '../lookups/freshness.ts'
import { Lookups } from '../lookups/lookups.ts'
import type { RedisLayer } from '../redis/layer.ts'

declare module 'fastify' {
  interface FastifyInstance {
    lookups: Lookups
  }
}

interface CachePluginOptions {
  /** The cache's clock (tests move it); default Date.now. */
  now?: () => number
}

/** The cache in front of the upstream, and the lookups the routes call through it. */
async function cache (app: FastifyInstance, { now = Date.now }: CachePluginOptions): Promise<void> {
  const { config } = app
  const purgeMemory = purgeMemoryMs(config.UPSTREAM_TIMEOUT_MS)
  const { store, coalescer } = app.redisLayer === undefined
    ? { store: new MemoryStore({ now, purgeMemoryMs: purgeMemory }), coalescer: undefined }
    : sharedCache(app.redisLayer, now, purgeMemory, loadBoundMs(config.UPSTREAM_TIMEOUT_MS))
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
    freshness: freshnessPolicy(config),
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
  const store = new LocalTier({ shared, events: bus, now, purgeMemoryMs })
  // The owner renews its lock while it loads: a waiter looks again after each lifetime, up to the load's bound.
  return { store, coalescer: { claim: async (key) => await lock.claim(key), maxClaims: Math.ceil(loadBoundMs / lock.ttlMs) } }
}

export default fp(cache, { name: 'cache', dependencies: ['config', 'telemetry', 'redis', 'upstream'] })
