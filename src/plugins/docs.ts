import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { DOCS_PREFIX } from '../http/operational-routes.js'

/**
 * The OpenAPI document, generated from the routes' TypeBox schemas (so it cannot drift from what is
 * validated and served), at /docs/json, and Swagger UI at /docs. Registered before the routes, which
 * it collects as they are added.
 */
async function docs (app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'profile-bff',
        version: '1',
        description: 'The Public Profile Lookup Service\'s three routes, same paths and bodies, cached and without credentials.'
      },
      tags: [
        { name: 'profiles', description: 'The upstream\'s routes' },
        { name: 'operations', description: 'Health, readiness and metrics (never rate limited)' }
      ]
    }
  })
  await app.register(swaggerUi, {
    routePrefix: DOCS_PREFIX,
    // A CSP of its own for the UI's pages (scripts and styles from here only), instead of the API's
    // `default-src 'none'` that would leave the page blank.
    staticCSP: true,
    // Without `upgrade-insecure-requests`: over plain HTTP on a non-loopback address the browser would
    // ask for the UI's scripts over https, and the page would stay blank.
    transformStaticCSP: (policy) => policy.replace(/\s*upgrade-insecure-requests;?/, '')
  })
}

export default fp(docs, { name: 'docs' })
