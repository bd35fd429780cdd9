import { createHash } from 'node:crypto'
import fastifyCaching from '@fastify/caching'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance, FastifyReply } from 'fastify'
import fp from 'fastify-plugin'
import { commaSeparated, DOCUMENT, referRefusals } from '../schemas/document.ts'
import { requiredHeaders } from '../schemas/headers.ts'
import { DOCS_PREFIX } from './route-config.ts'

/** The docs change only with a deploy: browsers may keep them an hour, and revalidate with their ETag. */
const DOCS_MAX_AGE_SECONDS = 3600

/**
 * Sets the body's tag through @fastify/caching, which remembers it: the next If-None-Match with it is
 * answered 304 by the plugin's own onRequest hook, before the route runs. Sound here (not on the data
 * routes) because a docs body never changes while the process runs.
 */
function tagOnce (tags: Map<string, string>, reply: FastifyReply, body: string): void {
  let tag = tags.get(body)
  if (tag === undefined) {
    tag = `"${createHash('sha1').update(body).digest('base64url')}"`
    tags.set(body, tag)
  }
  reply.etag(tag)
}

/**
 * The OpenAPI document, generated from the routes' TypeBox schemas (so it cannot drift from what is
 * validated and served), at /docs/json, and Swagger UI at /docs. Registered before the routes, which
 * it collects as they are added.
 */
async function docs (app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: DOCUMENT,
    // Only OpenAPI documents are made here (never Swagger 2's `swaggerObject`).
    transformObject: (made) => 'openapiObject' in made ? referRefusals(commaSeparated(requiredHeaders(made.openapiObject))) : made.swaggerObject
  })
  // Its own scope: the docs' caching hooks never run on the data routes.
  await app.register(async (scope) => {
    // Tags per body, computed once: the docs' bodies are the same for the life of the process.
    const tags = new Map<string, string>()
    // Before the plugin's own onSend, which stores the tag this one sets.
    scope.addHook('onSend', async (_request, reply, payload) => {
      if (reply.statusCode === 200 && !reply.hasHeader('etag') && typeof payload === 'string') tagOnce(tags, reply, payload)
      return payload
    })
    await scope.register(fastifyCaching, { privacy: 'public', expiresIn: DOCS_MAX_AGE_SECONDS })
    await scope.register(swaggerUi, {
      routePrefix: DOCS_PREFIX,
      // A CSP of its own for the UI's pages (scripts and styles from here only), instead of the API's
      // `default-src 'none'` that would leave the page blank.
      staticCSP: true,
      // Without `upgrade-insecure-requests`: over plain HTTP on a non-loopback address the browser would
      // ask for the UI's scripts over https, and the page would stay blank.
      transformStaticCSP: (policy) => policy.replace(/\s*upgrade-insecure-requests;?/, '')
    })
  })
}

export default fp(docs, { name: 'docs', dependencies: ['route-config'] })
