import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { CacheStack } from '../cache/cache-stack.ts'
import { FreshEvictions } from '../cache/fresh-evictions.ts'
import { RedisDriver } from '../cache/redis-driver.ts'
import { encodedBytes } from '../http/encoded-bodies.ts'
import { loadBudget } from '../load-budget.ts'
import { refusalOf } from '../errors.ts'
import { freshnessPolicy } from '../lookups/freshness.ts'
import { Lookups } from '../lookups/lookups.ts'
import { isBudgetDropped } from '../upstream/budget/priorities.ts'
import { steadyNow } from '../steady-clock.ts'

declare module 'fastify' {
  interface FastifyInstance {
    lookups: Lookups
    /** The loads under way, for a shutdown (and a test moving the clock) to wait for: their answers are stored. */
    cacheLoads: Pick<CacheStack, 'settled'>
  }
}

interface CachePluginOptions {
  /** The cache's clock (tests move it); default steadyNow. */
  now?: () => number
}

/** The cache in front of the upstream (Redis behind this process's tier when REDIS_URL is set), and the lookups the routes call through it. */
async function cache (app: FastifyInstance, { now = steadyNow }: CachePluginOptions): Promise<void> {
  const { config, redisLayer } = app
  const budget = loadBudget(config)
  const freshness = freshnessPolicy(config)
  const warnings = new FreshEvictions({
    now,
    warn: (evicted) => {
      app.log.warn({ evicted, cacheMemoryMb: config.CACHE_MEMORY_MB }, 'the in-process store evicts fresh entries: raise CACHE_MEMORY_MB (docs/operations.md, "Sizing")')
    }
  })
  const stack = new CacheStack({
    memory: {
      maxBytes: config.CACHE_MEMORY_MB * 1024 * 1024,
      encodedBytes,
      telemetry: {
        memoryStore: app.telemetry.store.memoryStore,
        freshEviction: () => {
          app.telemetry.store.freshEviction()
          warnings.evicted()
        }
      }
    },
    ...(redisLayer !== undefined && {
      shared: {
        driver: new RedisDriver({
          redis: redisLayer.client,
          health: redisLayer.health,
          clock: redisLayer.clock,
          purgeMemoryMs: budget.purgeMemoryMs,
          lock: redisLayer.lock,
          bus: redisLayer.bus,
          failsOver: config.REDIS_SENTINELS !== undefined
        }),
        redis: redisLayer.health,
        bus: redisLayer.bus,
        claim: async (key) => await redisLayer.lock.claim(key)
      }
    }),
    budget,
    now,
    freshMs: (resource, status) => (status === 404 ? freshness.notFound : freshness[resource]).freshMs,
    telemetry: app.telemetry,
    // Only what reached the upstream or its identity provider holds: our own refusals (budget, queue, breaker, back-off,
    // no token) cost them nothing, and the stale read after one may ask again.
    holdsBack: (error) => !isBudgetDropped(error) && refusalOf(error) === undefined,
    onError: (error, key, failure) => {
      // A revalidation the fleet's budget had no room for is no failure: the stale entry stays, and is tried again.
      if (failure === 'revalidate' && isBudgetDropped(error)) app.log.debug({ err: error, key }, 'background revalidation deferred: no upstream budget')
      else if (failure === 'revalidate') app.log.warn({ err: error, key }, 'background revalidation failed')
      else app.log.debug({ err: error, key }, 'cache store unavailable')
    }
  })
  app.decorate('cacheLoads', stack)
  app.decorate('lookups', new Lookups({
    cache: stack,
    upstream: app.upstream,
    keyPrefix: config.CACHE_KEY_PREFIX,
    budget,
    freshness,
    now
  }))
  app.addHook('onClose', async () => {
    // After the requests (Fastify closes the server first), before Redis: sent calls' answers are still stored.
    await stack.settled(config.SHUTDOWN_TIMEOUT_MS)
    stack.close()
  })
}

export default fp(cache, { name: 'cache', dependencies: ['config', 'telemetry', 'redis', 'upstream'] })
