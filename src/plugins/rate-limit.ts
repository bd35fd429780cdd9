import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { RATE_LIMITED, withRetryAfter } from '../errors.js'
import { DOCS_PREFIX } from './docs.js'

const MINUTE_MS = 60_000

/** Routes for operators, orchestrators and the docs: never counted against a client's budget. */
export function isOperationalRoute (route: string | undefined): boolean {
  if (route === undefined) return false
  return route === '/healthz' || route === '/readyz' || route === '/metrics' || route === DOCS_PREFIX || route.startsWith(`${DOCS_PREFIX}/`)
}

/**
 * RATE_LIMIT_PER_MINUTE requests per client address per minute (0: no limit). The address is
 * `request.ip`, which follows X-Forwarded-For only when TRUST_PROXY is set. With REDIS_URL the counts
 * live in Redis, so every instance draws on the same budget; if Redis fails, requests are let through
 * (skipOnError): a Redis outage is never the caller's problem.
 */
async function clientRateLimit (app: FastifyInstance): Promise<void> {
  const { config } = app
  if (config.RATE_LIMIT_PER_MINUTE === 0) return
  await app.register(rateLimit, {
    max: config.RATE_LIMIT_PER_MINUTE,
    timeWindow: MINUTE_MS,
    ...(app.redis !== undefined && { redis: app.redis, nameSpace: `${config.CACHE_KEY_PREFIX}ratelimit:` }),
    skipOnError: true,
    allowList: (request: FastifyRequest) => isOperationalRoute(request.routeOptions.url),
    // Thrown to the one error handler, which answers the contract's body with this Retry-After.
    errorResponseBuilder: (_request, context) => {
      const seconds = Math.max(1, Math.ceil(context.ttl / 1000))
      return withRetryAfter(new RATE_LIMITED(seconds), seconds)
    }
  })
}

export default fp(clientRateLimit, { name: 'rate-limit', dependencies: ['config', 'redis', 'error-handler'] })
