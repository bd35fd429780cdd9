import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { unshedErrorResponses } from '../schemas/error-docs.ts'
import { NO_STORE_HEADER, REQUEST_ID_HEADER } from '../schemas/headers.ts'

/** Prometheus scrapes this: the app's metrics and Node's process metrics, in the text format. */
const metricsRoute: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/metrics', {
    config: { operational: true, answeredUnderPressure: true },
    schema: {
      operationId: 'getMetrics',
      summary: 'Prometheus metrics (text exposition format)',
      description: 'This instance\'s counters and histograms (requests, cache, upstream, Redis) and Node\'s process metrics, ' +
        'for Prometheus to scrape; answered even while load is shed, when they matter most.',
      tags: ['operations'],
      response: {
        // Its own media type: the errors stay JSON.
        200: {
          description: 'Prometheus text format 0.0.4',
          headers: { ...NO_STORE_HEADER, ...REQUEST_ID_HEADER },
          content: { 'text/plain': { schema: Type.String() } }
        },
        ...unshedErrorResponses
      }
    }
  }, async (_request, reply) => {
    reply.header('cache-control', 'no-store').type(app.telemetry.contentType)
    return await app.telemetry.render()
  })
}

export default metricsRoute
