import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'

/** Prometheus scrapes this: the app's metrics and Node's process metrics, in the text format. */
const metricsRoute: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/metrics', {
    config: { operational: true, answeredUnderPressure: true },
    schema: {
      tags: ['operations'],
      summary: 'Prometheus metrics (text exposition format)',
      produces: ['text/plain'],
      response: { 200: Type.String({ description: 'Prometheus text format 0.0.4' }) }
    }
  }, async (_request, reply) => {
    reply.header('cache-control', 'no-store').type(app.telemetry.contentType)
    return await app.telemetry.render()
  })
}

export default metricsRoute
