import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import findMyWay from 'find-my-way'
import { shortPrefix } from '../http/caller-input.ts'
import { callerWentAway } from '../http/caller-signal.ts'
import { bodyDrained } from '../http/linger.ts'
import { errorResponse } from '../http/error-response.ts'
import { EXPECTED_FAILURES, maxAgeOf, METHOD_NOT_ALLOWED, NOT_FOUND, refusalOf, retryAfterOf } from '../errors.ts'
import { RefusalSummary } from '../logging/refusal-summary.ts'
import { steadyNow } from '../steady-clock.ts'

/** Why no route answers a request: with the methods its path has (sent as `Allow`) when it has some. */
type NoRouteError = FastifyError & { allow?: string }

declare module 'fastify' {
  interface FastifyInstance {
    /** Answers an error Fastify raised before routing (`frameworkErrors`), as any other error. */
    answerFrameworkError: (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => void
    /** METHOD_NOT_ALLOWED when the path has routes for other methods only, else NOT_FOUND. */
    noRouteError: (method: string, url: string) => NoRouteError
  }
}

interface ErrorHandlerOptions {
  /** The app's clock, for the refusals' summary line (tests move it); default steadyNow. */
  now?: () => number
}

/**
 * One place where every failure becomes the contract's JSON error, with the right caching headers. A caller refused at
 * once (see `refusal`) is counted, and summed up in one warn line a second at most, rather than a line each.
 */
async function errorHandler (app: FastifyInstance, { now = steadyNow }: ErrorHandlerOptions): Promise<void> {
  const refusals = new RefusalSummary({ now, write: (counts) => { app.log.warn({ refusals: counts }, 'callers refused at once') } })
  app.addHook('onClose', async () => { refusals.flush() })
  const notFoundMaxAge = app.config.NOT_FOUND_TTL_SECONDS
  const methods = routeMethods(app)
  app.decorate('noRouteError', (method: string, url: string): NoRouteError => {
    const path = url.split('?')[0] ?? '/'
    const allowed = methods(path)
    // A method the path has is not refused as such: a wildcard route (the docs' files) may still find nothing there.
    if (allowed.length === 0 || allowed.includes(method)) return new NOT_FOUND(method, shortPrefix(path))
    return Object.assign(new METHOD_NOT_ALLOWED(method, allowed.join(', ')), { allow: allowed.join(', ') })
  })

  app.setNotFoundHandler(async (request) => {
    throw app.noRouteError(request.method, request.url)
  })

  app.setErrorHandler(async (raised: NoRouteError, request, reply) => {
    if (callerWentAway(request, raised)) {
      // Its connection is closed: nothing can be sent, and nothing of ours failed.
      request.log.info('the caller went away before its answer')
      return
    }
    // Fastify parses a body even for no route: what the caller asked for does not exist, whatever its body (one too large stays 413).
    const error = request.is404 && unparsedBody(raised) ? app.noRouteError(request.method, request.url) : raised
    const body = errorResponse(error)
    const refused = refusalOf(error)
    if (refused !== undefined) {
      app.telemetry.refusal(refused)
      refusals.count(refused)
    } else if (EXPECTED_FAILURES.has(body.code)) {
      request.log.warn({ err: error }, body.message)
    } else if (body.statusCode >= 500) {
      request.log.error({ err: error }, 'request failed')
    }
    const retryAfter = retryAfterOf(error)
    if (retryAfter !== undefined) reply.header('retry-after', retryAfter)
    if (error.allow !== undefined) reply.header('allow', error.allow)
    reply.header('cache-control', errorCaching(error, body.statusCode, notFoundMaxAge))
    // The body still on its way would reset the connection Fastify closes after this answer, and the client could lose it.
    if (body.statusCode === 413) await bodyDrained(request.raw)
    return await reply.code(body.statusCode).type('application/json; charset=utf-8').send(body)
  })

  app.decorate('answerFrameworkError', (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const body = errorResponse(error)
    reply.headers(app.answerHeaders.of(request.headers, request.id))
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

/** Fastify's 400 for a body it could not parse (not JSON, empty, shorter or longer than its Content-Length). */
function unparsedBody (error: FastifyError): boolean {
  return error.statusCode === 400 && error.code?.startsWith('FST_ERR_CTP_') === true
}

/** A negative entry's 404 may be kept as long as the entry lives, any other 404 for NOT_FOUND_TTL_SECONDS; other errors never. */
function errorCaching (error: unknown, status: number, notFoundMaxAge: number): string {
  const maxAge = maxAgeOf(error)
  if (maxAge !== undefined) return `public, max-age=${maxAge}`
  return status === 404 ? `public, max-age=${notFoundMaxAge}` : 'no-store'
}

export default fp(errorHandler, { name: 'error-handler', dependencies: ['config', 'answer-headers'] })
