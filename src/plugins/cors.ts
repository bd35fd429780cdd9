import cors from '@fastify/cors'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

/** Response headers a frontend may read besides the simple ones: caching, retry and tracing. */
export const EXPOSED_HEADERS = [
  'age', 'etag', 'retry-after', 'x-cache', 'x-request-id', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'
]

/**
 * CORS for the frontends named in CORS_ORIGINS (`*`: any origin). Reads only, without credentials:
 * the service holds no user session, so there is nothing for a cookie to authorise.
 */
async function corsPolicy (app: FastifyInstance): Promise<void> {
  const origins = parseOrigins(app.config.CORS_ORIGINS)
  // Only a real preflight (Origin and Access-Control-Request-Method) is answered; any other OPTIONS is
  // an unsupported method, `404 NOT_FOUND` like the others, not @fastify/cors's plain-text 400.
  app.addHook('onRequest', (request, reply, done) => {
    const { origin, 'access-control-request-method': method } = request.headers
    if (request.method === 'OPTIONS' && (origin === undefined || method === undefined)) reply.callNotFound()
    else done()
  })
  await app.register(cors, {
    origin: origins.includes('*') ? '*' : origins,
    methods: ['GET', 'HEAD'],
    exposedHeaders: EXPOSED_HEADERS,
    // Browsers may reuse a preflight answer this long (seconds); most lookups need none anyway.
    maxAge: 600
  })
}

/** `https://a.example, https://b.example` → the origins, blanks dropped. */
export function parseOrigins (value: string): string[] {
  return value.split(',').map((origin) => origin.trim()).filter((origin) => origin !== '')
}

export default fp(corsPolicy, { name: 'cors', dependencies: ['config'] })
