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
  }, async (request, reply) => {
    const { username } = request.params
    // A fresh entry held here is answered without a promise: most requests, and the cheapest path.
    const held = lookups.held('profile', username)
    if (held !== undefined) return serveCached(reply, held, encodings)
    const { value: served, ms } = await timed(async () => await lookups.profile(username, () => request.signal))
    return await serveCached(reply, served, encodings, served.entry, ms)
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
  }, async (request, reply) => {
    const { username } = request.params
    const held = lookups.held('timeline', username)
    if (held !== undefined) return serveCached(reply, held, encodings)
    const { value: served, ms } = await timed(async () => await lookups.timeline(username, () => request.signal))
    return await serveCached(reply, served, encodings, served.entry, ms)
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
    preValidation: async (request) => {
      const query = request.query as { query?: unknown }
      if (typeof query.query === 'string') query.query = query.query.toLowerCase()
    }
  }, async (request, reply) => {
    const { username } = request.params
    const field = FIELD_BY_QUERY.get(request.query.query) as ProfileField
    const held = lookups.heldField(username, field)
    if (held !== undefined) return serveCached(reply, held, encodings, fieldRepresentation(held, field))
    const { value: served, ms } = await timed(async () => await lookups.field(username, field, () => request.signal))
    return await serveCached(reply, served, encodings, fieldRepresentation(served, field), ms)
  })

  await app.register(batchRoutes, { encodings })
}

/** A field's body, and its tag, which derives from its profile's: it changes exactly when the profile does. */
function fieldRepresentation ({ fieldBody, entry }: FieldServed, field: ProfileField): Representation {
  return { body: fieldBody, etag: `${entry.etag.slice(0, -1)}.${field}"` }
}

export default profileRoutes
