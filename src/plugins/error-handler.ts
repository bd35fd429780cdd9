import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import findMyWay from 'find-my-way'
import { shortPrefix } from '../http/caller-input.ts'
import { callerWentAway } from '../http/caller-signal.ts'
import { errorResponse } from '../http/error-response.ts'
import { EXPECTED_FAILURES, METHOD_NOT_ALLOWED, NOT_FOUND, retryAfterOf } from '../errors.ts'
import { freshnessPolicy } from '../lookups/freshness.ts'

/** Sets headers every answer carries (CORS, security, request id) on one answer. */
export type AnswerHeaders = (request: FastifyRequest, reply: FastifyReply) => void

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * The headers every answer carries, for answers no hook sees: Fastify answers a malformed URL
     * before routing, so the plugins that set them on every request register their setters here too.
     */
    answerHeaders: AnswerHeaders[]
    /** Answers an error Fastify raised before routing (`frameworkErrors`), as any other error. */
    answerFrameworkError: (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => void
  }
}

/** One place where every failure becomes the contract's JSON error, with the right caching headers. */
async function errorHandler (app: FastifyInstance): Promise<void> {
  const notFoundMaxAge = freshnessPolicy(app.config).notFound.freshMs / 1000
  const methods = routeMethods(app)
  app.decorate('answerHeaders', [])

  app.setNotFoundHandler(async (request, reply) => {
    const path = request.url.split('?')[0] ?? '/'
    const allowed = methods(path)
    if (allowed.length === 0) throw new NOT_FOUND(request.method, shortPrefix(path))
    reply.header('allow', allowed.join(', '))
    throw new METHOD_NOT_ALLOWED(request.method, allowed.join(', '))
  })

  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    if (callerWentAway(request, error)) {
      // Its connection is closed: nothing can be sent, and nothing of ours failed.
      request.log.info('the caller went away before its answer')
      return
    }
    const body = errorResponse(error)
    if (EXPECTED_FAILURES.has(body.code)) {
      request.log.warn({ err: error }, body.message)
    } else if (body.statusCode >= 500) {
      request.log.error({ err: error }, 'request failed')
    }
    const retryAfter = retryAfterOf(error)
    if (retryAfter !== undefined) reply.header('retry-after', retryAfter)
    setErrorCaching(reply, body.statusCode, notFoundMaxAge)
    return await reply.code(body.statusCode).type('application/json; charset=utf-8').send(body)
  })

  app.decorate('answerFrameworkError', (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    for (const setHeaders of app.answerHeaders) setHeaders(request, reply)
    const body = errorResponse(error)
    reply.code(body.statusCode).header('cache-control', 'no-store').type('application/json; charset=utf-8').send(body)
  })
}

/**
 * The methods routed for a path, so that a known path asked with another method answers 405 with
 * `Allow` rather than 404. A router of its own, filled as the routes are added (Fastify's router says
 * only "no route").
 */
function routeMethods (app: FastifyInstance): (path: string) => string[] {
  const router = findMyWay({ ignoreTrailingSlash: false, maxParamLength: Number.MAX_SAFE_INTEGER })
  const known = new Set<string>()
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      if (known.has(`${method} ${route.url}`)) continue
      known.add(`${method} ${route.url}`)
      router.on(method as findMyWay.HTTPMethod, route.url, () => {})
    }
  })
  const candidates = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const
  return (path) => candidates.filter((method) => router.find(method, path) !== null)
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
