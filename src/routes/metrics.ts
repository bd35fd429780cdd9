import { promisify } from 'node:util'
import { brotliCompress, constants, gzip } from 'node:zlib'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { preferredCoding, worthEncoding, type Coding } from '../http/encoded-bodies.ts'
import { addVary } from '../http/serve.ts'
import { unshedErrorResponses } from '../schemas/error-docs.ts'
import { ENCODING_HEADERS, NO_STORE_HEADER, REQUEST_ID_HEADER } from '../schemas/headers.ts'

/** A new body every scrape, compressed while the scraper waits: quick levels, not the data routes' best-once ones. */
const compressors: Record<Coding, (body: string) => Promise<Buffer>> = {
  br: async (body) => await promisify(brotliCompress)(body, { params: { [constants.BROTLI_PARAM_QUALITY]: 4 } }),
  gzip: async (body) => await promisify(gzip)(body, { level: 6 })
}

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
          headers: { ...NO_STORE_HEADER, ...ENCODING_HEADERS, ...REQUEST_ID_HEADER },
          content: { 'text/plain': { schema: Type.String() } }
        },
        ...unshedErrorResponses
      }
    },
    // Compressed as it leaves, once it is text: an error (small JSON) goes out as it is.
    onSend: async (request, reply, payload) => {
      if (reply.statusCode !== 200 || typeof payload !== 'string' || !worthEncoding(payload)) return payload
      addVary(reply, 'accept-encoding')
      const coding = preferredCoding(request.headers['accept-encoding'])
      if (coding === undefined) return payload
      reply.header('content-encoding', coding)
      return await compressors[coding](payload)
    }
  }, async (_request, reply) => {
    reply.header('cache-control', 'no-store').type(app.telemetry.contentType)
    return await app.telemetry.render()
  })
}

export default metricsRoute
