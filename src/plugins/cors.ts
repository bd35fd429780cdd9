import cors from '@fastify/cors'
import type { FastifyInstance, onRequestHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import type { AnswerHeaders } from './error-handler.ts'

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
  const anyOrigin = origins.includes('*')
  // Only a real preflight (Origin and Access-Control-Request-Method) is answered; any other OPTIONS is
  // an unsupported method, `405 METHOD_NOT_ALLOWED` like the others, not @fastify/cors's plain-text 400.
  const setHeaders = corsHeaders(origins)
  const preflightsOnly: onRequestHookHandler = (request, reply, done) => {
    const { origin, 'access-control-request-method': method } = request.headers
    if (origin === undefined || method === undefined) {
      setHeaders(request, reply)
      reply.callNotFound()
    } else {
      done()
    }
  }
  const options = {
    origin: anyOrigin ? '*' : origins,
    methods: ['GET', 'HEAD'],
    exposedHeaders: EXPOSED_HEADERS,
    // Browsers may reuse a preflight answer this long (seconds); most lookups need none anyway.
    maxAge: 600
  }
  if (anyOrigin) {
    // The same two headers on every answer: they join the constant block, and @fastify/cors, in a scope
    // of its own with the preflight check before its hook, answers only the preflights (its OPTIONS
    // route, every path), so a GET runs neither.
    Object.assign(app.constantHeaders, ANY_ORIGIN_HEADERS)
    await app.register(async (preflights) => {
      preflights.addHook('onRequest', preflightsOnly)
      await preflights.register(cors, options)
    })
  } else {
    app.answerHeaders.push(setHeaders)
    app.addHook('onRequest', (request, reply, done) => {
      if (request.method === 'OPTIONS') preflightsOnly.call(app, request, reply, done)
      else done()
    })
    await app.register(cors, options)
  }
}

const ANY_ORIGIN_HEADERS = { 'access-control-allow-origin': '*', 'access-control-expose-headers': EXPOSED_HEADERS.join(', ') }

/** @fastify/cors's answer to a simple request, for the answers its hook never sees (see plugins/error-handler.ts). */
function corsHeaders (origins: readonly string[]): AnswerHeaders {
  return (request, reply) => {
    const { origin } = request.headers
    if (origins.includes('*')) reply.headers(ANY_ORIGIN_HEADERS)
    else if (origin !== undefined && origins.includes(origin)) {
      reply.header('access-control-allow-origin', origin).header('vary', 'origin').header('access-control-expose-headers', EXPOSED_HEADERS.join(', '))
    }
  }
}

/** `https://a.example, https://b.example` → the origins, blanks dropped. */
function parseOrigins (value: string): string[] {
  return value.split(',').map((origin) => origin.trim()).filter((origin) => origin !== '')
}

export default fp(corsPolicy, { name: 'cors', dependencies: ['config', 'error-handler', 'answer-headers'] })
