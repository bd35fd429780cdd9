import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { MemoryStore } from '../cache/memory-store.js'
import { SwrCache } from '../cache/swr-cache.js'
import { Lookups } from '../lookups.js'

declare module 'fastify' {
  interface FastifyInstance {
    lookups: Lookups
  }
}

const seconds = (value: number): number => value * 1000

/** The cache in front of the upstream, and the lookups the routes call through it. */
async function cache (app: FastifyInstance): Promise<void> {
  const { config } = app
  const store = new MemoryStore()
  const swr = new SwrCache({
    store,
    onBackgroundError: (error, key) => app.log.warn({ err: error, key }, 'background revalidation failed')
  })
  const staleMs = seconds(config.STALE_TTL_SECONDS)
  app.decorate('lookups', new Lookups({
    cache: swr,
    upstream: app.upstream,
    keyPrefix: config.CACHE_KEY_PREFIX,
    profile: { freshMs: seconds(config.PROFILE_TTL_SECONDS), staleMs },
    timeline: { freshMs: seconds(config.TIMELINE_TTL_SECONDS), staleMs },
    notFound: { freshMs: seconds(config.NOT_FOUND_TTL_SECONDS), staleMs: 0 }
  }))
  app.addHook('onClose', async () => { await store.close() })
}

export default fp(cache, { name: 'cache', dependencies: ['config', 'upstream'] })
