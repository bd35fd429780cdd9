import { createHash } from 'node:crypto'
import fastifyCaching from '@fastify/caching'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { EncodedBodies, preferredCoding, worthEncoding } from '../http/encoded-bodies.ts'
import { addVary, codedEtag, matchesEtag } from '../http/serve.ts'
import { commaSeparated, DOCUMENT, referRefusals } from '../schemas/document.ts'
import { requiredHeaders } from '../schemas/headers.ts'
import { DOCS_PREFIX } from './route-config.ts'

/** The docs change only with a deploy: browsers may keep them an hour, and revalidate with their ETag. */
const DOCS_MAX_AGE_SECONDS = 3600

/** The body's tag, computed once per body: the docs' bodies are the same for the life of the process. */
function tagOf (tags: Map<string, string>, body: string): string {
  let tag = tags.get(body)
  if (tag === undefined) {
    tag = `"${createHash('sha1').update(body).digest('base64url')}"`
    tags.set(body, tag)
  }
  return tag
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
    // Only its Cache-Control: its tag store (never filled, as reply.etag is not called) would answer 304 before the route,
    // for any URL's tag and without the 200's headers.
    await scope.register(fastifyCaching, { privacy: 'public', expiresIn: DOCS_MAX_AGE_SECONDS })
    const tags = new Map<string, string>()
    // As on the data routes: a large body encoded once, each coding with a tag of its own.
    const encodings = new EncodedBodies()
    // After its onSend, so that a 304 keeps the Cache-Control it gave the 200; the UI's files (streams) have their own tags.
    scope.addHook('onSend', async (request, reply, payload) => {
      if (reply.statusCode !== 200 || typeof payload !== 'string') return payload
      const identityTag = tagOf(tags, payload)
      const encoded = worthEncoding(payload) ? encodings.peek(identityTag) ?? await encodings.get(identityTag, payload) : undefined
      const coding = encoded === undefined ? undefined : preferredCoding(request.headers['accept-encoding'])
      if (encoded !== undefined) addVary(reply, 'accept-encoding')
      const tag = coding === undefined ? identityTag : codedEtag(identityTag, coding)
      const body = encoded === undefined || coding === undefined ? payload : encoded[coding]
      reply.header('etag', tag)
      if (matchesEtag(request.headers['if-none-match'], tag)) {
        reply.code(304).removeHeader('content-type')
        // No body; a HEAD's is dropped by Fastify's own hook after this one, which measures it (and fails on none).
        return request.method === 'HEAD' ? body : null
      }
      if (coding !== undefined) reply.header('content-encoding', coding)
      return body
    })
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
