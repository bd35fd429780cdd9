import type { FastifyReply } from 'fastify'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { INVALID_FIELD, INVALID_USERNAME } from '../errors.ts'
import { UsernameParams } from '../schemas/common.ts'
import { EncodedBodies } from '../http/encoded-bodies.ts'
import { fieldErrorResponses, lookupErrorResponses } from '../schemas/error-docs.ts'
import { CACHED_HEADERS, withHeaders } from '../schemas/headers.ts'
import { FIELD_BY_QUERY, FieldQuery, FieldResponse, ProfileResponse, QUERY_VALUES, TimelineResponse, type ProfileField } from '../schemas/profile.ts'
import batchRoutes from './batch.ts'
import { serveCached, type Representation } from '../http/serve-cached.ts'
import type { Served } from '../cache/swr-cache.ts'
import type { FieldServed } from '../lookups/lookups.ts'
import { timed } from '../http/timed.ts'
import { validationErrors } from '../http/validation-errors.ts'

const errorResponses = {
  304: withHeaders(Type.Null({ description: 'Not Modified: the caller\'s If-None-Match is current' }), CACHED_HEADERS),
  ...lookupErrorResponses
}

const usernameErrors = validationErrors({ params: () => new INVALID_USERNAME() })

const ConditionalHeaders = Type.Object({
  'if-none-match': Type.Optional(Type.String({ description: 'the ETag of the version you hold: answered 304 while it is current' }))
})

/** The three data routes (the upstream's own, same paths, same bodies, no credentials) and the batch. */
const profileRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { lookups } = app
  const encodings = new EncodedBodies()

  app.get('/profile/:username', {
    schema: {
      operationId: 'getProfile',
      summary: 'A member\'s whole profile',
      tags: ['profiles'],
      params: UsernameParams,
      headers: ConditionalHeaders,
      response: { 200: withHeaders(ProfileResponse, CACHED_HEADERS), ...errorResponses }
    },
    schemaErrorFormatter: usernameErrors
  }, (request, reply) => {
    const { username } = request.params
    // A fresh entry held here is answered at once, without a promise: most requests, and the cheapest path.
    const held = lookups.held('profile', username)
    if (held !== undefined) return serveCached(reply, held, encodings)
    return serveLoaded(reply, async () => await lookups.profile(username, () => request.signal))
  })

  app.get('/profile/:username/timeline', {
    schema: {
      operationId: 'getTimeline',
      summary: 'A member\'s timeline posts, newest first',
      tags: ['profiles'],
      params: UsernameParams,
      headers: ConditionalHeaders,
      response: { 200: withHeaders(TimelineResponse, CACHED_HEADERS), ...errorResponses }
    },
    schemaErrorFormatter: usernameErrors
  }, (request, reply) => {
    const { username } = request.params
    const held = lookups.held('timeline', username)
    if (held !== undefined) return serveCached(reply, held, encodings)
    return serveLoaded(reply, async () => await lookups.timeline(username, () => request.signal))
  })

  app.get('/user/:username', {
    schema: {
      operationId: 'getField',
      summary: 'One field of a member\'s profile',
      description: '`query` matches case-insensitively; the answer has exactly one key (`credits` answers `Credits`).',
      tags: ['profiles'],
      params: UsernameParams,
      querystring: FieldQuery,
      headers: ConditionalHeaders,
      response: { 200: withHeaders(FieldResponse, CACHED_HEADERS), ...errorResponses, ...fieldErrorResponses }
    },
    schemaErrorFormatter: validationErrors({
      params: () => new INVALID_USERNAME(),
      querystring: () => new INVALID_FIELD(QUERY_VALUES.join(', '))
    }),
    // Case-insensitive matching: lower-case `query` before the schema checks it against the ten values.
    preValidation: (request, _reply, done) => {
      const query = request.query as { query?: unknown }
      if (typeof query.query === 'string') query.query = query.query.toLowerCase()
      done()
    }
  }, (request, reply) => {
    const { username } = request.params
    const field = FIELD_BY_QUERY.get(request.query.query) as ProfileField
    const held = lookups.heldField(username, field)
    if (held !== undefined) return serveCached(reply, held, encodings, fieldRepresentation(held, field))
    return serveLoaded(reply, async () => await lookups.field(username, field, () => request.signal), (served) => fieldRepresentation(served, field))
  })

  await app.register(batchRoutes, { encodings })

  /** What the cache could not answer at once (a miss, a stale entry, a store away): timed for Server-Timing, then served. */
  async function serveLoaded<S extends Served> (
    reply: FastifyReply, lookup: () => Promise<S>, representation: (served: S) => Representation = (served) => served.entry
  ): Promise<void> {
    const { value: served, ms } = await timed(lookup)
    await serveCached(reply, served, encodings, representation(served), ms)
  }
}

/** A field's body, and its tag, which derives from its profile's: it changes exactly when the profile does. */
function fieldRepresentation ({ fieldBody, entry }: FieldServed, field: ProfileField): Representation {
  return { body: fieldBody, etag: `${entry.etag.slice(0, -1)}.${field}"` }
}

export default profileRoutes
