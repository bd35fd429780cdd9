import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Headers every answer carries with the same value (security, CORS for any origin): the plugins that
     * own them add theirs at registration, and one hook sets the whole block on each answer.
     */
    constantHeaders: Record<string, string>
  }
}

/**
 * The headers of every answer, in one hook: the constant block, and the request's id as `X-Request-Id`
 * (taken from the caller's header when it looks like one, see logging.ts), so a frontend team can quote
 * the id that finds the log lines.
 */
async function answerHeaders (app: FastifyInstance): Promise<void> {
  const constant: Record<string, string> = {}
  app.decorate('constantHeaders', constant)
  const setHeaders = (request: FastifyRequest, reply: FastifyReply): void => {
    reply.headers(constant).header('x-request-id', request.id)
  }
  app.answerHeaders.push(setHeaders)
  // Hooks on every request are callback-style: no promise per request on the hot path.
  app.addHook('onRequest', (request, reply, done) => {
    setHeaders(request, reply)
    done()
  })
}

export default fp(answerHeaders, { name: 'answer-headers', dependencies: ['error-handler'] })
