import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { INVALID_FIELD, INVALID_USERNAME } from '../errors.ts'
import { UsernameParams } from '../schemas/common.ts'
import { EncodedBodies } from '../http/encoded-bodies.ts'
import { fieldErrorResponses, lookupErrorResponses } from '../schemas/error-docs.ts'
import { CACHED_HEADERS, withHeaders } from '../schemas/headers.ts'
import { FIELD_BY_QUERY, FieldQuery, FieldResponse, ProfileResponse, QUERY_VALUES, TimelineResponse, type ProfileField } from '../schemas/profile.ts'
import batchRoutes from './batch.ts'
import { callerSignal } from '../http/caller-signal.ts'
import { serve } from '../http/serve.ts'
import { validationErrors } from '../http/validation-errors.ts'

const notModified = withHeaders(Type.Null({ description: 'Not Modified: the caller\'s If-None-Match is current' }), CACHED_HEADERS)

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
      description: 'The ten fields, as the upstream has them. Served from the cache while fresh; past that, served stale while ' +
        'one call revalidates it, or when the upstream fails. `If-None-Match` with a current `ETag` answers 304.',
      tags: ['profiles'],
      params: UsernameParams,
      headers: ConditionalHeaders,
      response: { 200: withHeaders(ProfileResponse, CACHED_HEADERS), 304: notModified, ...lookupErrorResponses }
    },
    schemaErrorFormatter: usernameErrors
  }, (request, reply) => serve(reply, lookups.profile(request.params.username, callerSignal(request), reply), encodings))

  app.get('/profile/:username/timeline', {
    schema: {
      operationId: 'getTimeline',
      summary: 'A member\'s timeline posts, newest first',
      description: 'The posts as the upstream has them, cached like the profile (fresher: a timeline changes more often). ' +
        '`If-None-Match` with a current `ETag` answers 304.',
      tags: ['profiles'],
      params: UsernameParams,
      headers: ConditionalHeaders,
      response: { 200: withHeaders(TimelineResponse, CACHED_HEADERS), 304: notModified, ...lookupErrorResponses }
    },
    schemaErrorFormatter: usernameErrors
  }, (request, reply) => serve(reply, lookups.timeline(request.params.username, callerSignal(request), reply), encodings))

  app.get('/user/:username', {
    schema: {
      operationId: 'getField',
      summary: 'One field of a member\'s profile',
      description: '`query` matches case-insensitively; the answer has exactly one key (`credits` answers `Credits`).',
      tags: ['profiles'],
      params: UsernameParams,
      querystring: FieldQuery,
      headers: ConditionalHeaders,
      response: { 200: withHeaders(FieldResponse, CACHED_HEADERS), 304: notModified, ...fieldErrorResponses }
    },
    schemaErrorFormatter: validationErrors({
      params: () => new INVALID_USERNAME(),
      querystring: () => new INVALID_FIELD('query', QUERY_VALUES.join(', '))
    }),
    // Case-insensitive matching: lower-case `query` before the schema checks it against the ten values.
    preValidation: (request, _reply, done) => {
      const query = request.query as { query?: unknown }
      if (typeof query.query === 'string') query.query = query.query.toLowerCase()
      done()
    }
  }, (request, reply) => {
    const field = FIELD_BY_QUERY.get(request.query.query) as ProfileField
    // From the cached profile: a miss loads the whole profile once, which then answers all ten fields.
    return serve(reply, lookups.profile(request.params.username, callerSignal(request), reply), encodings, ({ entry }) => lookups.fieldOf(entry, field))
  })

  await app.register(batchRoutes, { encodings })
}

export default profileRoutes
