import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type, type Static } from '@sinclair/typebox'
import { errorResponse } from '../http/error-response.ts'
import { retryAfterOf, SHUTTING_DOWN } from '../errors.ts'
import { ErrorBody, readinessErrorResponses, unshedErrorResponses } from '../schemas/error-docs.ts'
import { NO_STORE_HEADER, REQUEST_ID_HEADER, RETRY_AFTER_HEADER, withHeaders } from '../schemas/headers.ts'

const Literals = <T extends string>(values: readonly T[], description: string) =>
  Type.Union(values.map((value) => Type.Literal(value)), { description })

export const ReadinessBody = Type.Object({
  status: Literals(['ready', 'degraded', 'unavailable'], 'ready: all well; degraded: still serving (see the other fields); unavailable: shutting down'),
  redis: Literals(['up', 'down', 'not_configured'], 'the shared cache (not_configured: REDIS_URL unset, in-process cache)'),
  bus: Type.Optional(Literals(['up', 'down'],
    'only with REDIS_URL: whether the other instances\' events reach this one (down while Redis answers: the cache is still shared, ' +
    'purges elsewhere reach this instance within 2 s)')),
  token: Literals(['none', 'held', 'renewing', 'failing'],
    'the upstream access token (none: not needed yet; renewing: an exchange under way; failing: no usable token, from the first ' +
    'failed or unanswered exchange until one is held again)'),
  breaker: Literals(['closed', 'open', 'half_open'], 'the upstream circuit breaker'),
  tokenReason: Type.Optional(Type.String({ description: 'only while `token` is `failing`: why no usable token can be had' })),
  upstreamBudgetRps: Type.Optional(Type.Number({
    description: 'only with UPSTREAM_MAX_RPS set: the upstream calls per second allowed now (halved after an upstream 429, then ' +
      'recovering), the fleet\'s, or this instance\'s share while Redis is away'
  })),
  fleetInstances: Type.Optional(Type.Integer({
    description: 'only with UPSTREAM_MAX_RPS set: the instances the budget is shared by, the live count while Redis is up; ' +
      'while it is away, the larger of the largest count Redis answered in the last 3 s and UPSTREAM_EXPECTED_INSTANCES'
  }))
}, {
  examples: [
    { status: 'degraded', redis: 'down', token: 'held', breaker: 'closed' },
    { status: 'degraded', redis: 'up', token: 'failing', breaker: 'closed', tokenReason: 'the identity provider has not answered the current exchange' }
  ]
})
export type Readiness = Static<typeof ReadinessBody>

type Checks = Omit<Readiness, 'status'>

/**
 * Degraded (still 200) when Redis or its events are down, the token cannot be renewed or the breaker is not closed:
 * the instance still serves what it has cached and stale, so taking it out of the load balancer would
 * only turn a partial outage into a total one (every instance shares the same Redis and upstream).
 * Unavailable (503) only while the instance shuts down, so that the load balancer drains it.
 */
export function readiness (checks: Checks, closing: boolean): Readiness {
  if (closing) return { status: 'unavailable', ...checks }
  const healthy = checks.redis !== 'down' && checks.bus !== 'down' && checks.token !== 'failing' && checks.breaker === 'closed'
  return { status: healthy ? 'ready' : 'degraded', ...checks }
}

/** Liveness and readiness, for orchestrators and load balancers. */
const healthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/healthz', {
    config: { operational: true, answeredUnderPressure: true },
    schema: {
      operationId: 'getLiveness',
      summary: 'Liveness: 200 while the process runs',
      description: 'For an orchestrator\'s liveness probe: answers as long as the process can answer at all, even while load is shed.',
      tags: ['operations'],
      response: { 200: withHeaders(Type.Object({ status: Type.Literal('ok') }), { ...NO_STORE_HEADER, ...REQUEST_ID_HEADER }), ...unshedErrorResponses }
    }
  }, async (_request, reply) => {
    // A probe must reach this process, never a cache's copy of an earlier answer.
    reply.header('cache-control', 'no-store')
    return { status: 'ok' as const }
  })

  app.get('/readyz', {
    config: { operational: true },
    schema: {
      operationId: 'getReadiness',
      summary: 'Readiness: 200 while the instance can serve (ready or degraded), 503 while it shuts down',
      description: 'For a load balancer\'s or orchestrator\'s readiness probe. `degraded` is still 200: the instance serves what it ' +
        'has cached, and the other fields say what is missing. 503 while it shuts down, or sheds load.',
      tags: ['operations'],
      response: {
        200: withHeaders(ReadinessBody, { ...NO_STORE_HEADER, ...REQUEST_ID_HEADER }),
        ...readinessErrorResponses,
        // The state only while shutting down: shedding load answers the plain error (SERVICE_OVERLOADED).
        503: Type.Composite([ErrorBody(['SHUTTING_DOWN', 'SERVICE_OVERLOADED']), Type.Partial(ReadinessBody)], {
          description: '`SHUTTING_DOWN`, with the state; or `SERVICE_OVERLOADED` (load shedding)',
          examples: [{ ...errorResponse(new SHUTTING_DOWN()), status: 'unavailable', redis: 'up', token: 'held', breaker: 'closed' }],
          headers: { ...NO_STORE_HEADER, ...RETRY_AFTER_HEADER, ...REQUEST_ID_HEADER }
        })
      }
    }
  }, async (_request, reply) => {
    reply.header('cache-control', 'no-store')
    const failure = app.tokens.failure
    const budget = app.upstream.budgetRate
    const report = readiness({
      redis: app.redisLayer === undefined ? 'not_configured' : app.redisLayer.health.up ? 'up' : 'down',
      ...(app.redisLayer !== undefined && { bus: app.redisLayer.bus.ready ? 'up' as const : 'down' as const }),
      token: app.tokens.state,
      breaker: app.upstream.breakerState,
      ...(failure !== undefined && { tokenReason: failure }),
      ...(budget !== undefined && { upstreamBudgetRps: Math.round(budget.rps * 100) / 100, fleetInstances: budget.instances })
    }, app.closing)
    if (report.status !== 'unavailable') return report
    const shuttingDown = new SHUTTING_DOWN()
    reply.code(503).header('retry-after', retryAfterOf(shuttingDown))
    return { ...errorResponse(shuttingDown), ...report }
  })
}

export default healthRoutes
