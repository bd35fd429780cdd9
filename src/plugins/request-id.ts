import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'

/**
 * Every answer carries its request's id as `X-Request-Id` (taken from the caller's header when it looks
 * like one, see logging.ts), so a frontend team can quote the id that finds the log lines.
 */
async function requestIdHeader (app: FastifyInstance): Promise<void> {
  // Hooks on every request are callback-style: no promise per request on the hot path.
  const setHeader = (request: FastifyRequest, reply: FastifyReply): void => { reply.header('x-request-id', request.id) }
  app.answerHeaders.push(setHeader)
  app.addHook('onRequest', (request, reply, done) => {
    setHeader(request, reply)
    done()
  })
}

export default fp(requestIdHeader, { name: 'request-id', dependencies: ['error-handler'] })
