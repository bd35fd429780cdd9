import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import { RATE_LIMITED, refusal, withRetryAfter, type RetryAfter } from '../errors.ts'
import { callerAddress } from '../logging/caller-address.ts'
import { clientAddress } from '../rate-limit/client-address.ts'
import { LocalRateCounts, type RateCounts } from '../rate-limit/rate-counts.ts'
import { prependOnRequest } from '../http/route-hooks.ts'
import { RATE_LIMIT_CLIENTS, RATE_LIMIT_WINDOW_MS } from '../rate-limit/policy.ts'
import { SharedRateCounts } from '../rate-limit/shared-rate-counts.ts'
import { steadyNow } from '../steady-clock.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** Counts `times` more requests against the caller's budget (a batch counts once per username); throws RATE_LIMITED beyond it. */
    chargeRateLimit: (request: FastifyRequest, reply: FastifyReply, times: number) => void
  }
}

interface RateLimitOptions {
  /** The app's clock (tests move it); default steadyNow. */
  now?: () => number
}

/**
 * RATE_LIMIT_PER_MINUTE requests per client address per minute (0: no limit). The address is
 * `request.ip`, which follows X-Forwarded-For only when TRUST_PROXY is set; IPv6 clients count per /64
 * (clientAddress). With REDIS_URL the counts are shared through Redis
 * (SharedRateCounts: synced every 100 ms rather than a Redis command per request), so every instance
 * draws on the same budget; while Redis is down each instance counts alone: a Redis outage is never the
 * caller's problem. The hook is a callback that answers at once, the count being known here:
 * @fastify/rate-limit's own hook awaits a promise and rebuilds the route's options on every request, a
 * few µs of every cache hit.
 */
async function clientRateLimit (app: FastifyInstance, { now = steadyNow }: RateLimitOptions): Promise<void> {
  const { config, redisLayer } = app
  const max = config.RATE_LIMIT_PER_MINUTE
  if (max === 0) {
    app.decorate('chargeRateLimit', () => {})
    return
  }
  const counts: RateCounts = redisLayer === undefined
    ? new LocalRateCounts({ windowMs: RATE_LIMIT_WINDOW_MS, maxClients: RATE_LIMIT_CLIENTS, now })
    : new SharedRateCounts({
      redis: redisLayer.client,
      health: redisLayer.health,
      keyPrefix: `${config.CACHE_KEY_PREFIX}ratelimit:`,
      windowMs: RATE_LIMIT_WINDOW_MS,
      maxClients: RATE_LIMIT_CLIENTS,
      // Windows on Redis's clock: every instance counts a minute into the same hash, whatever its own clock says.
      now: () => redisLayer.clock.toRedis(now()),
      onError: (error) => app.log.debug({ err: error }, 'rate limit counts not synced')
    })
  // Before the Redis client quits (the redis plugin was registered first, so it closes last).
  app.addHook('onClose', async () => { await counts.close() })

  /** Counts the request's `times` and sets the headers that tell the client; the refusal when past the budget. */
  const charge = (request: FastifyRequest, reply: FastifyReply, times: number): (Error & RetryAfter) | undefined => {
    const count = counts.add(clientAddress(callerAddress(request)), times)
    const reset = Math.ceil(count.ttl / 1000)
    reply.header('x-ratelimit-limit', max).header('x-ratelimit-remaining', Math.max(0, max - count.current)).header('x-ratelimit-reset', reset)
    if (count.current <= max) return undefined
    const retryAfter = Math.max(1, reset)
    // A client past its budget asks again and again: counted and summed up, not a warn line with a stack each.
    return refusal('rate-limited', () => withRetryAfter(new RATE_LIMITED(retryAfter), retryAfter))
  }
  const countRequest: onRequestHookHandler = (request, reply, done) => { done(charge(request, reply, 1)) }
  // Decided once per route: operational routes get no hook at all.
  app.addHook('onRoute', (route) => {
    if (route.config?.operational !== true) prependOnRequest(route, countRequest)
  })
  app.decorate('chargeRateLimit', (request: FastifyRequest, reply: FastifyReply, times: number) => {
    if (times <= 0) return
    const refused = charge(request, reply, times)
    if (refused !== undefined) throw refused
  })
}

export default fp(clientRateLimit, { name: 'rate-limit', dependencies: ['config', 'redis', 'error-handler', 'route-config'] })
