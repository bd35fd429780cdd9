import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { PrometheusTelemetry } from '../telemetry/prometheus-telemetry.ts'
import type { RequestSeries } from '../telemetry/request-metrics.ts'
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
  // A request's series, found through two maps by route and method: prom-client's own count hashed a labels object.
  const series = new Map<string, Map<string, RequestSeries>>()
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? UNMATCHED_ROUTE
    let byMethod = series.get(route)
    if (byMethod === undefined) series.set(route, byMethod = new Map())
    let routeSeries = byMethod.get(request.method)
    if (routeSeries === undefined) byMethod.set(request.method, routeSeries = metrics.requestSeries(request.method, route))
    routeSeries.observe(reply.statusCode, reply.elapsedTime / 1000)
    done()
  })
}

export default fp(telemetry, { name: 'telemetry' })
