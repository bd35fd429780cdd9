import rateLimit, { type FastifyRateLimitStore, type FastifyRateLimitStoreCtor } from '@fastify/rate-limit'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { RATE_LIMITED, withRetryAfter } from '../errors.ts'
import { isOperationalRoute } from '../http/operational-routes.ts'
import { RATE_LIMIT_WINDOW_MS, STANDALONE_RATE_LIMIT_CLIENTS } from '../http/rate-limit-policy.ts'
import { SharedRateCounts } from '../redis/shared-rate-counts.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** Counts `times` more requests against the caller's budget (a batch counts once per username); RATE_LIMITED beyond it. */
    chargeRateLimit: (request: FastifyRequest, reply: FastifyReply, times: number) => Promise<void>
  }
}

/**
 * RATE_LIMIT_PER_MINUTE requests per client address per minute (0: no limit). The address is
 * `request.ip`, which follows X-Forwarded-For only when TRUST_PROXY is set. With REDIS_URL the counts
 * are shared through Redis (SharedRateCounts: synced every 100 ms rather than a Redis command per
 * request), so every instance draws on the same budget; while Redis is down each instance counts
 * alone, and if a count fails, requests are let through (skipOnError): a Redis outage is never the
 * caller's problem.
 */
async function clientRateLimit (app: FastifyInstance): Promise<void> {
  const { config, redisLayer } = app
  if (config.RATE_LIMIT_PER_MINUTE === 0) {
    app.decorate('chargeRateLimit', async () => {})
    return
  }
  let store: FastifyRateLimitStoreCtor | undefined
  if (redisLayer !== undefined) {
    const counts = new SharedRateCounts({
      redis: redisLayer.client,
      health: redisLayer.health,
      keyPrefix: `${config.CACHE_KEY_PREFIX}ratelimit:`,
      onError: (error) => app.log.debug({ err: error }, 'rate limit counts not synced')
    })
    // Before the Redis client quits (the redis plugin was registered first, so it closes last).
    app.addHook('onClose', async () => { await counts.close() })
    store = handing(counts)
  }
  // Operational routes get no limiter hook at all, decided once per route (before @fastify/rate-limit's own onRoute).
  app.addHook('onRoute', (route) => {
    if (isOperationalRoute(route.url)) route.config = { ...route.config, rateLimit: false }
  })
  await app.register(rateLimit, {
    max: config.RATE_LIMIT_PER_MINUTE,
    timeWindow: RATE_LIMIT_WINDOW_MS,
    ...(store !== undefined ? { store } : { cache: STANDALONE_RATE_LIMIT_CLIENTS }),
    skipOnError: true,
    // Thrown to the one error handler, which answers the contract's body with this Retry-After.
    errorResponseBuilder: (_request, context) => {
      const seconds = Math.max(1, Math.ceil(context.ttl / 1000))
      return withRetryAfter(new RATE_LIMITED(seconds), seconds)
    }
  })
  const limit = app.createRateLimit()
  app.decorate('chargeRateLimit', async (request: FastifyRequest, reply: FastifyReply, times: number) => {
    for (let charged = 0; charged < times; charged++) {
      const count = await limit(request)
      if (count.isAllowed) return
      reply.header('x-ratelimit-remaining', count.remaining)
      if (count.isExceeded) throw withRetryAfter(new RATE_LIMITED(Math.max(1, count.ttlInSeconds)), count.ttlInSeconds)
    }
  })
}

/** @fastify/rate-limit builds its store itself (`new Store(options)`): a class handing it the one built here. */
function handing (counts: SharedRateCounts): FastifyRateLimitStoreCtor {
  return class implements FastifyRateLimitStore {
    incr = counts.incr.bind(counts)
    child = counts.child.bind(counts)
  }
}

export default fp(clientRateLimit, { name: 'rate-limit', dependencies: ['config', 'redis', 'error-handler'] })
