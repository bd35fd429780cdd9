import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify'
import fp from 'fastify-plugin'
import { errorResponse } from '../error-response.js'
import { NOT_FOUND, retryAfterOf } from '../errors.js'

/** One place where every failure becomes the contract's JSON error, with the right caching headers. */
async function errorHandler (app: FastifyInstance): Promise<void> {
  const notFoundMaxAge = app.config.NOT_FOUND_TTL_SECONDS

  app.setNotFoundHandler(async (request) => {
    throw new NOT_FOUND(request.method, request.url.split('?')[0] ?? '/')
  })

  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    const body = errorResponse(error)
    // Load shedding is expected under load: a warn, not one error line per refused request.
    if (body.statusCode >= 500 && !body.code.startsWith('UPSTREAM_') && body.code !== 'SERVICE_OVERLOADED') {
      request.log.error({ err: error }, 'request failed')
    } else if (body.statusCode >= 500 || body.statusCode === 429) {
      request.log.warn({ err: error }, body.message)
    }
    const retryAfter = retryAfterOf(error)
    if (retryAfter !== undefined) reply.header('retry-after', retryAfter)
    setErrorCaching(reply, body.statusCode, notFoundMaxAge)
    return await reply.code(body.statusCode).type('application/json; charset=utf-8').send(body)
  })
}

/** Errors are never cached, but a 404 may be, for as long as a negative entry lives. */
function setErrorCaching (reply: FastifyReply, status: number, notFoundMaxAge: number): void {
  if (status !== 404) {
    reply.header('cache-control', 'no-store')
  } else if (!reply.hasHeader('cache-control')) {
    reply.header('cache-control', `public, max-age=${notFoundMaxAge}`)
  }
}

export default fp(errorHandler, { name: 'error-handler', dependencies: ['config'] })
