import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { CacheStack } from '../cache/cache-stack.ts'
import { RedisDriver } from '../cache/redis-driver.ts'
import { loadBudget } from '../load-budget.ts'
import { freshnessPolicy } from '../lookups/freshness.ts'
import { Lookups } from '../lookups/lookups.ts'
import { isBudgetDropped } from '../upstream/budget/priorities.ts'

declare module 'fastify' {
  interface FastifyInstance {
    lookups: Lookups
  }
}

interface CachePluginOptions {
  /** The cache's clock (tests move it); default Date.now. */
  now?: () => number
}

/** The cache in front of the upstream (Redis behind this process's tier when REDIS_URL is set), and the lookups the routes call through it. */
async function cache (app: FastifyInstance, { now = Date.now }: CachePluginOptions): Promise<void> {
  const { config, redisLayer } = app
  const budget = loadBudget(config)
  const stack = new CacheStack({
    ...(redisLayer !== undefined && {
      shared: {
        driver: new RedisDriver({ redis: redisLayer.client, health: redisLayer.health, clock: redisLayer.clock, purgeMemoryMs: budget.purgeMemoryMs }),
        bus: redisLayer.bus,
        claim: async (key) => await redisLayer.lock.claim(key)
      }
    }),
    budget,
    now,
    telemetry: app.telemetry,
    onError: (error, key, failure) => {
      // A revalidation the fleet's budget had no room for is no failure: the stale entry stays, and is tried again.
      if (failure === 'revalidate' && isBudgetDropped(error)) app.log.debug({ err: error, key }, 'background revalidation deferred: no upstream budget')
      else if (failure === 'revalidate') app.log.warn({ err: error, key }, 'background revalidation failed')
      else app.log.debug({ err: error, key }, 'cache store unavailable')
    }
  })
  app.decorate('lookups', new Lookups({
    cache: stack,
    upstream: app.upstream,
    keyPrefix: config.CACHE_KEY_PREFIX,
    freshness: freshnessPolicy(config),
    now
  }))
  app.addHook('onClose', async () => { stack.close() })
}

export default fp(cache, { name: 'cache', dependencies: ['config', 'telemetry', 'redis', 'upstream'] })
