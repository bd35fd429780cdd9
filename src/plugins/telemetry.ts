import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { PrometheusTelemetry } from '../telemetry/prometheus-telemetry.ts'
import { sampledTraceIds, tracingConfigured } from '../telemetry/tracing.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** Where the logic classes report what operators watch (the `Telemetry` seam), rendered at /metrics. */
    telemetry: PrometheusTelemetry
  }
}

/** Label of requests no route matched: one series for all of them, whatever URL was asked. */
const UNMATCHED_ROUTE = 'unmatched'

/** Builds the app's metrics (a registry of its own) and counts every answered request. */
async function telemetry (app: FastifyInstance): Promise<void> {
  // With tracing on, a latency sample names its sampled trace (an exemplar: a panel jumps from a slow bucket to it).
  const metrics = new PrometheusTelemetry(tracingConfigured(app.config) ? { exemplar: sampledTraceIds } : {})
  app.decorate('telemetry', metrics)
  app.addHook('onResponse', (request, reply, done) => {
    metrics.observeRequest({
      method: request.method,
      route: request.routeOptions.url ?? UNMATCHED_ROUTE,
      status: reply.statusCode,
      seconds: reply.elapsedTime / 1000
    })
    done()
  })
}

export default fp(telemetry, { name: 'telemetry' })
