import type { IncomingHttpHeaders } from 'node:http'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

/** Headers a plugin adds to every answer: the same each time, or chosen from the request's headers (CORS by Origin). */
export type HeaderContribution = Readonly<Record<string, string>> | ((requestHeaders: IncomingHttpHeaders) => Readonly<Record<string, string>>)

declare module 'fastify' {
  interface FastifyInstance {
    answerHeaders: {
      /** Adds headers to every answer; only while the app registers its plugins. */
      add: (contribution: HeaderContribution) => void
      /** Every answer's headers, for an answer written past the hooks (before routing, or refused by Node's HTTP parser). */
      of: (requestHeaders: IncomingHttpHeaders, requestId: string) => Record<string, string>
    }
  }
}

/**
 * Owns the headers of every answer: the block the other plugins contribute at registration (security,
 * CORS), and the request's id as `X-Request-Id` (the caller's own when it looks like one, see logging.ts),
 * so a frontend team can quote the id that finds the log lines. One hook sets them all.
 */
async function answerHeaders (app: FastifyInstance): Promise<void> {
  const constant: Record<string, string> = {}
  const chosen: Array<(requestHeaders: IncomingHttpHeaders) => Readonly<Record<string, string>>> = []
  let ready = false
  app.addHook('onReady', async () => { ready = true })
  app.decorate('answerHeaders', {
    add (contribution: HeaderContribution) {
      if (ready) throw new Error('answer headers are contributed while the app registers its plugins')
      if (typeof contribution === 'function') chosen.push(contribution)
      else Object.assign(constant, contribution)
    },
    of (requestHeaders: IncomingHttpHeaders, requestId: string) {
      const headers = { ...constant }
      for (const choose of chosen) Object.assign(headers, choose(requestHeaders))
      headers['x-request-id'] = requestId
      return headers
    }
  })
  // Hooks on every request are callback-style: no promise per request on the hot path.
  app.addHook('onRequest', (request, reply, done) => {
    reply.headers(constant)
    for (const choose of chosen) reply.headers(choose(request.headers))
    reply.header('x-request-id', request.id)
    done()
  })
}

export default fp(answerHeaders, { name: 'answer-headers' })
