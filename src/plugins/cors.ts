import cors, { type FastifyCorsOptions } from '@fastify/cors'
import Fastify, { type FastifyInstance, type onRequestHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import type { HeaderContribution } from './answer-headers.ts'

/** Response headers a frontend may read besides the simple ones: caching, retry and tracing. */
const EXPOSED_HEADERS = [
  'age', 'etag', 'retry-after', 'server-timing', 'x-cache', 'x-request-id', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'
]

/**
 * CORS for the frontends named in CORS_ORIGINS (`*`: any origin). Reads only, without credentials:
 * the service holds no user session, so there is nothing for a cookie to authorise.
 */
async function corsPolicy (app: FastifyInstance): Promise<void> {
  const origins = parseOrigins(app.config.CORS_ORIGINS)
  const options: FastifyCorsOptions = {
    origin: origins.includes('*') ? '*' : origins,
    methods: ['GET', 'HEAD'],
    exposedHeaders: EXPOSED_HEADERS,
    // Browsers may reuse a preflight answer this long (seconds); most lookups need none anyway.
    maxAge: 600,
    // For HTTP caches, as every other answer not of the data: the browser's preflight cache heeds maxAge, not this.
    cacheControl: 'no-store'
  }
  app.answerHeaders.add(await simpleRequestHeaders(options, origins))
  // @fastify/cors, in a scope of its own, answers only the preflights (its OPTIONS route, every path).
  // Any other OPTIONS is an unsupported method, `405 METHOD_NOT_ALLOWED` like the others, not its plain-text 400.
  const preflightsOnly: onRequestHookHandler = (request, reply, done) => {
    const { origin, 'access-control-request-method': method } = request.headers
    if (origin === undefined || method === undefined) reply.callNotFound()
    else done()
  }
  await app.register(async (preflights) => {
    preflights.addHook('onRequest', preflightsOnly)
    await preflights.register(cors, options)
  })
}

/**
 * What @fastify/cors sends with a simple request's answer, asked of the library itself, once for each
 * allowed origin and once for any other: every answer then gets it from the answer-headers hook, those
 * @fastify/cors's hook never sees included (Fastify's before routing, Node's parser's).
 */
async function simpleRequestHeaders (options: FastifyCorsOptions, origins: readonly string[]): Promise<HeaderContribution> {
  const probe = Fastify()
  try {
    await probe.register(cors, options)
    probe.get('/', async () => '')
    const answer = async (origin?: string): Promise<Record<string, string>> => {
      const { headers } = await probe.inject({ url: '/', headers: origin === undefined ? {} : { origin } })
      return Object.fromEntries(Object.entries(headers)
        .filter(([name]) => name.startsWith('access-control-') || name === 'vary')
        .map(([name, value]) => [name, String(value)]))
    }
    const otherwise = await answer()
    if (options.origin === '*') return otherwise
    const byOrigin = new Map(await Promise.all(origins.map(async (origin) => [origin, await answer(origin)] as const)))
    return (requestHeaders) => byOrigin.get(requestHeaders.origin ?? '') ?? otherwise
  } finally {
    await probe.close()
  }
}

/** `https://a.example, https://b.example` → the origins, blanks dropped. */
function parseOrigins (value: string): string[] {
  return value.split(',').map((origin) => origin.trim()).filter((origin) => origin !== '')
}

export default fp(corsPolicy, { name: 'cors', dependencies: ['config', 'answer-headers'] })
