import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'

/** Liveness and readiness, for orchestrators and load balancers. */
const healthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/healthz', {
    schema: { tags: ['operations'], summary: 'Liveness: 200 while the process runs', response: { 200: Type.Object({ status: Type.Literal('ok') }) } }
  }, async () => ({ status: 'ok' as const }))

  app.get('/readyz', {
    schema: {
      tags: ['operations'],
      summary: 'Readiness: 200 while the service can serve',
      response: { 200: Type.Object({ status: Type.Union([Type.Literal('ready'), Type.Literal('degraded')]) }) }
    }
  }, async () => ({ status: 'ready' as const }))
}

export default healthRoutes
