import helmet, { type FastifyHelmetOptions } from '@fastify/helmet'
import Fastify, { type FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { DOCS_PREFIX } from '../http/operational-routes.js'

/**
 * Helmet's headers, tuned for a JSON API read by browsers on other origins: a content security policy
 * that allows nothing (a JSON body is never a document to run; /docs sends its own, see plugins/docs.ts),
 * no framing, and a cross-origin resource policy that lets other origins read us (CORS decides who).
 */
const TUNED = {
  contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } },
  crossOriginResourcePolicy: { policy: 'cross-origin' },
  frameguard: { action: 'deny' }
} satisfies FastifyHelmetOptions

/** /docs serves HTML pages: helmet's whole set. */
export const DOCS_HELMET_OPTIONS: FastifyHelmetOptions = TUNED

/**
 * The API's answers are JSON only: the headers that protect an HTML document (its window, scripts,
 * DNS prefetches, downloads, Flash policies, the old XSS filter) have nothing to act on, and each header
 * costs every hit about a microsecond. Kept: CSP, frame options, nosniff, Referrer-Policy, HSTS, CORP.
 */
export const API_HELMET_OPTIONS: FastifyHelmetOptions = {
  ...TUNED,
  crossOriginOpenerPolicy: false,
  originAgentCluster: false,
  xDnsPrefetchControl: false,
  xDownloadOptions: false,
  xPermittedCrossDomainPolicies: false,
  xXssProtection: false
}

/**
 * The headers helmet sets for these options, found once: a throwaway app with @fastify/helmet takes
 * one request, and a hook after helmet's reads what it set. @fastify/helmet itself would rebuild helmet
 * from the options on every request (re-parsing the policy each time: 11–14 µs of a ~150 µs hit);
 * the headers depend on the options only, so they are the same for every answer.
 */
export async function helmetHeaders (options: FastifyHelmetOptions): Promise<Record<string, string>> {
  const probe = Fastify()
  await probe.register(helmet, options)
  let headers: Record<string, string> = {}
  probe.addHook('onRequest', (_request, reply, done) => {
    headers = Object.fromEntries(Object.entries(reply.raw.getHeaders()).map(([name, value]) => [name, String(value)]))
    done()
  })
  probe.get('/', async () => null)
  await probe.inject('/')
  await probe.close()
  return headers
}

async function securityHeaders (app: FastifyInstance): Promise<void> {
  const api = await helmetHeaders(API_HELMET_OPTIONS)
  const docs = await helmetHeaders(DOCS_HELMET_OPTIONS)
  app.answerHeaders.push((_request, reply) => { reply.headers(api) })
  // Hooks on every request are callback-style: no promise per request on the hot path.
  app.addHook('onRequest', (request, reply, done) => {
    reply.headers(request.routeOptions.url?.startsWith(DOCS_PREFIX) === true ? docs : api)
    done()
  })
}

export default fp(securityHeaders, { name: 'security-headers', dependencies: ['error-handler'] })
