import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { ErrorResponse, UsernameParams } from '../schemas/common.js'
import { FIELD_BY_QUERY, FieldQuery, FieldResponse, ProfileResponse, TimelineResponse, type ProfileField } from '../schemas/profile.js'
import { serveCached } from './serve-cached.js'

const errorResponses = {
  304: Type.Null({ description: 'Not Modified: the caller\'s If-None-Match is current' }),
  400: ErrorResponse,
  404: ErrorResponse,
  429: ErrorResponse,
  502: ErrorResponse,
  503: ErrorResponse,
  504: ErrorResponse
}

/** The three data routes: the upstream's own, same paths, same bodies, no credentials. */
const profileRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { lookups } = app

  app.get('/profile/:username', {
    schema: {
      summary: 'A member\'s whole profile',
      tags: ['profiles'],
      params: UsernameParams,
      response: { 200: ProfileResponse, ...errorResponses }
    }
  }, async (request, reply) => serveCached(reply, await lookups.profile(request.params.username)))

  app.get('/profile/:username/timeline', {
    schema: {
      summary: 'A member\'s timeline posts, newest first',
      tags: ['profiles'],
      params: UsernameParams,
      response: { 200: TimelineResponse, ...errorResponses }
    }
  }, async (request, reply) => serveCached(reply, await lookups.timeline(request.params.username)))

  app.get('/user/:username', {
    schema: {
      summary: 'One field of a member\'s profile',
      description: '`query` matches case-insensitively; the answer has exactly one key (`credits` answers `Credits`).',
      tags: ['profiles'],
      params: UsernameParams,
      querystring: FieldQuery,
      response: { 200: FieldResponse, ...errorResponses }
    },
    // Case-insensitive matching: lower-case `query` before the schema checks it against the ten values.
    preValidation: async (request) => {
      const query = request.query as { query?: unknown }
      if (typeof query.query === 'string') query.query = query.query.toLowerCase()
    }
  }, async (request, reply) => {
    const field = FIELD_BY_QUERY.get(request.query.query) as ProfileField
    const served = await lookups.field(request.params.username, field)
    return serveCached(reply, served, served.fieldBody, fieldEtag(served.entry.etag, field))
  })
}

/** A field's tag derives from its profile's: it changes exactly when the profile does. */
function fieldEtag (profileEtag: string, field: ProfileField): string {
  return `${profileEtag.slice(0, -1)}.${field}"`
}

export default profileRoutes
