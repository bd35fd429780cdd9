import { createHash } from 'node:crypto'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { errorCodes } from 'fastify'
import { Type } from '@sinclair/typebox'
import type { Served } from '../cache/cache-stack.ts'
import type { EncodedBodies } from '../http/encoded-bodies.ts'
import { errorResponse } from '../http/error-response.ts'
import { INVALID_BATCH, INVALID_FIELD } from '../errors.ts'
import { BatchQuery, BatchResponse, MAX_BATCH } from '../schemas/batch.ts'
import { isUsername, type ErrorResponse } from '../schemas/common.ts'
import { batchErrorResponses } from '../schemas/error-docs.ts'
import { CACHED_HEADERS, withHeaders } from '../schemas/headers.ts'
import { PROFILE_FIELDS, QUERY_VALUES } from '../schemas/profile.ts'
import { batchBody } from './batch-body.ts'
import { hasWellFormedEscapes } from '../http/caller-input.ts'
import { callerSignal, callerWentAway } from '../http/caller-signal.ts'
import { sendRepresentation, setCachingHeaders, setFailedLoadHeaders } from '../http/serve.ts'
import { timed } from '../http/timed.ts'
import { validationErrors } from '../http/validation-errors.ts'

interface BatchRoutesOptions {
  encodings: EncodedBodies
}

/** `GET /profiles?username=a&username=b[&fields=name,age]`: a list page's profiles in one request. */
const batchRoutes: FastifyPluginAsyncTypebox<BatchRoutesOptions> = async (app, { encodings }) => {
  const { lookups } = app

  app.get('/profiles', {
    schema: {
      operationId: 'getProfiles',
      summary: 'Several members\' profiles in one request',
      description: `1 to ${MAX_BATCH} distinct usernames. Each one is served as \`/profile/:username\` would serve it; ` +
        'one that fails is listed under `errors` with the error its own request would have answered, and the others are still served. ' +
        'For the rate limit, a batch counts once per username.',
      tags: ['profiles'],
      querystring: BatchQuery,
      headers: Type.Object({ 'if-none-match': Type.Optional(Type.String({ description: 'the ETag of a batch answer you hold' })) }),
      response: {
        200: withHeaders(BatchResponse, CACHED_HEADERS),
        304: withHeaders(Type.Null({ description: 'Not Modified: the caller\'s If-None-Match is current' }), CACHED_HEADERS),
        ...batchErrorResponses
      }
    },
    schemaErrorFormatter: validationErrors({ querystring: () => new INVALID_FIELD('fields', QUERY_VALUES.join(', ')) }),
    // `fields` comma-separated or repeated: split and lower-cased before the schema checks each value.
    preValidation: async (request) => {
      // A username sent as `%ZZ` or an encoded lone surrogate would reach the upstream as those characters: refused as a path's.
      if (!hasWellFormedEscapes(request.url)) throw new errorCodes.FST_ERR_BAD_URL(request.url)
      const query = request.query as { fields?: unknown }
      const given: unknown[] = typeof query.fields === 'string' ? [query.fields] : Array.isArray(query.fields) ? query.fields : []
      if (given.length > 0) query.fields = given.flatMap((value) => String(value).split(',')).map((field) => field.trim().toLowerCase())
    }
  }, async (request, reply) => {
    const usernames = [...new Set(request.query.username ?? [])]
    if (usernames.length < 1 || usernames.length > MAX_BATCH) throw new INVALID_BATCH(usernames.length)
    // The request itself was counted once already.
    app.chargeRateLimit(request, reply, usernames.length - 1)
    const wanted = request.query.fields === undefined ? undefined : new Set<string>(request.query.fields)
    const fields = wanted && PROFILE_FIELDS.filter((field) => wanted.has(field.toLowerCase()))
    const valid = usernames.filter(isUsername)
    const { value: results, ms } = await timed(async () => await lookups.profiles(valid, app.config.UPSTREAM_MAX_CONCURRENCY, callerSignal(request), reply))
    const served = new Map<string, Served | ErrorResponse>()
    let failed = false
    valid.forEach((username, i) => {
      const result = results[i] as PromiseSettledResult<Served>
      if (result.status === 'fulfilled') return served.set(username, result.value)
      // Nobody reads this batch any more.
      if (callerWentAway(request, result.reason)) throw result.reason
      const body = errorResponse(result.reason as Error)
      if (body.code === 'INTERNAL_ERROR') request.log.error({ err: result.reason }, 'batch member failed')
      served.set(username, body)
      failed = true
    })
    const { body, entries, cacheable } = batchBody(usernames, served, fields, (entry) => lookups.userOf(entry))
    if (entries.length > 0) setCachingHeaders(reply, entries, ms)
    // A member the cache could not serve makes the batch a miss, as its least fresh member.
    if (failed) setFailedLoadHeaders(reply, ms)
    if (!cacheable || entries.length === 0) reply.header('cache-control', 'no-store')
    return await sendRepresentation(reply, { body, etag: `"${createHash('sha1').update(body).digest('base64url')}"` }, encodings)
  })
}

export default batchRoutes
