import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** For operators, orchestrators and readers of the docs: never counted by the per-client rate limit. */
    operational?: boolean
    /** Still answered while load is shed: a process shedding load is alive, and operators need its numbers most then. */
    answeredUnderPressure?: boolean
    /** Serves HTML pages (the docs' UI): helmet's whole set of headers, not the JSON API's. */
    htmlPages?: boolean
  }
}

/** Where the OpenAPI UI (and its document under `/json`) is served. */
export const DOCS_PREFIX = '/docs'

/**
 * What kind of route each route is, as route config that the plugins read in their onRoute hooks. The
 * routes say it in their options; the docs' routes come from @fastify/swagger-ui, whose options carry no
 * route config, so they are marked here by their prefix. Registered before every plugin that reads it.
 */
async function routeConfig (app: FastifyInstance): Promise<void> {
  app.addHook('onRoute', (route) => {
    if (route.url === DOCS_PREFIX || route.url.startsWith(`${DOCS_PREFIX}/`)) {
      route.config = { ...route.config, operational: true, htmlPages: true }
    }
  })
}

export default fp(routeConfig, { name: 'route-config' })
