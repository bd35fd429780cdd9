import { getHeapStatistics } from 'node:v8'
import underPressure, { type FastifyUnderPressureOptions } from '@fastify/under-pressure'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { SERVICE_OVERLOADED, withRetryAfter } from '../errors.ts'

export type LoadSheddingOptions = Pick<FastifyUnderPressureOptions, 'maxEventLoopDelay' | 'maxHeapUsedBytes' | 'sampleInterval'>

/** How long a shed caller is told to wait: pressure passes in seconds, or the orchestrator steps in. */
export const SHED_RETRY_AFTER_SECONDS = 5

/**
 * Past these, new requests are refused at once rather than queued behind a saturated event loop
 * (which would make every caller slow and could end in an out-of-memory crash). No event-loop
 * utilization threshold: a process serving flat out is ~100% utilized while still answering in
 * milliseconds (measured: 503s for most of a benchmark at 7 ms of loop delay); delay is what callers feel.
 */
const DEFAULT_LOAD_SHEDDING: LoadSheddingOptions = {
  maxEventLoopDelay: 1_000,
  maxHeapUsedBytes: Math.floor(getHeapStatistics().heap_size_limit * 0.9)
}

/**
 * @fastify/under-pressure measures (event-loop delay and heap, sampled on a timer) and decides, from its
 * own scope: its per-request hook rebuilds the route's options on every request to find a route-level
 * handler we do not use. This hook asks it first, a few comparisons, and looks at the route only under
 * pressure. A shed request gets the contract's 503 SERVICE_OVERLOADED with Retry-After. Routes configured
 * `answeredUnderPressure` (liveness, metrics) still answer; /readyz sheds, which takes the instance out
 * of its load balancer until the pressure passes.
 */
async function loadShedding (app: FastifyInstance, options: LoadSheddingOptions): Promise<void> {
  let measuring: FastifyInstance | undefined
  await app.register(async (scope) => {
    await scope.register(underPressure, { ...DEFAULT_LOAD_SHEDDING, ...options })
    measuring = scope
  })
  // Set by the registration just awaited.
  const pressure = measuring as FastifyInstance
  app.decorate('isUnderPressure', () => pressure.isUnderPressure())
  // One hook for every request, unknown routes' included (no onRoute hook sees those); the route's config read only under pressure.
  app.addHook('onRequest', (request, _reply, done) => {
    if (!pressure.isUnderPressure() || request.routeOptions.config.answeredUnderPressure === true) {
      done()
      return
    }
    done(withRetryAfter(new SERVICE_OVERLOADED(SHED_RETRY_AFTER_SECONDS), SHED_RETRY_AFTER_SECONDS))
  })
}

export default fp(loadShedding, { name: 'load-shedding', dependencies: ['error-handler', 'route-config'] })
