import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { INVALID_USERNAME, UNAUTHORIZED } from '../errors.ts'
import { UsernameParams } from '../schemas/common.ts'
import { adminErrorResponses } from '../schemas/error-docs.ts'
import { NO_STORE_HEADER, RATE_LIMIT_HEADERS, REQUEST_ID_HEADER, withHeaders } from '../schemas/headers.ts'
import { validationErrors } from '../http/validation-errors.ts'

const PurgeResponse = Type.Object({
  username: Type.String(),
  stale: Type.Integer({ description: 'entries of this member now stale (profile, timeline, negative ones included)' })
}, { examples: [{ username: 'alice', stale: 2 }] })

/**
 * Operator routes. They exist only when ADMIN_TOKEN is set; otherwise every path here is an unknown
 * route (404 NOT_FOUND), so that nothing tells a caller there is anything to guess.
 */
const adminRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const token = app.config.ADMIN_TOKEN
  if (token === undefined) return
  const expected = digest(token)
  // Fastify's default text parser would let a text body through: a purge takes JSON or nothing (415 like any other type).
  app.removeContentTypeParser('text/plain')

  app.post('/admin/purge/:username', {
    schema: {
      operationId: 'purgeProfile',
      summary: 'Mark a member\'s cached entries stale on every instance',
      description: 'The next request for them is served STALE and revalidates once: a purge of a hot member cannot start a stampede. ' +
        'Where Redis has replicas, 200 means one of them holds the purge too, so that it survives a failover; 503 CACHE_UNAVAILABLE ' +
        '(with Retry-After) means Redis could not be reached, or no replica acknowledged the purge within 250 ms: retry (a purge is idempotent). ' +
        'Only when ADMIN_TOKEN is set; counted by the per-client rate limit.',
      tags: ['admin'],
      security: [{ adminToken: [] }],
      params: UsernameParams,
      response: { 200: withHeaders(PurgeResponse, { ...NO_STORE_HEADER, ...REQUEST_ID_HEADER, ...RATE_LIMIT_HEADERS }), ...adminErrorResponses }
    },
    schemaErrorFormatter: validationErrors({ params: () => new INVALID_USERNAME() }),
    // Before anything else looks at the request: a caller without the token learns nothing more.
    onRequest: async (request, reply) => {
      if (authorized(request.headers.authorization, expected)) return
      reply.header('www-authenticate', 'Bearer realm="admin"')
      throw new UNAUTHORIZED()
    }
  }, async (request, reply) => {
    const { username } = request.params
    const stale = await app.lookups.purge(username)
    reply.header('cache-control', 'no-store')
    return { username, stale }
  })
}

/** Equal-length digests, compared in constant time: neither the token nor its length leaks through timing. */
function authorized (header: string | undefined, expected: Buffer): boolean {
  const match = /^Bearer +(\S+)\s*$/i.exec(header ?? '')
  return match?.[1] !== undefined && timingSafeEqual(digest(match[1]), expected)
}

function digest (value: string): Buffer {
  return createHash('sha256').update(value).digest()
}

export default adminRoutes
