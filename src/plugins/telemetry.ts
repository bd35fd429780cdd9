import type { FastifyInstance, FastifyReply, FastifyRequest, onResponseHookHandler } from 'fastify'
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
  /** Counts a route's answers into its series by method, each made at its first request. */
  const observer = (route: string) => {
    const byMethod = new Map<string, RequestSeries>()
    return (request: FastifyRequest, reply: FastifyReply): void => {
      let series = byMethod.get(request.method)
      if (series === undefined) byMethod.set(request.method, series = metrics.requestSeries(request.method, route))
      series.observe(reply.statusCode, reply.elapsedTime / 1000)
    }
  }
  // Each route's hook knows its path: `request.routeOptions` would build and freeze an object per request to tell it.
  app.addHook('onRoute', (route) => {
    const observe = observer(route.url)
    const observeRoute: onResponseHookHandler = (request, reply, done) => {
      observe(request, reply)
      done()
    }
    route.onResponse = [...[route.onResponse ?? []].flat(), observeRoute]
  })
  // No onRoute hook sees the not-found handler: its answers are counted here.
  const observeUnmatched = observer(UNMATCHED_ROUTE)
  app.addHook('onResponse', (request, reply, done) => {
    if (request.is404) observeUnmatched(request, reply)
    done()
  })
}

export default fp(telemetry, { name: 'telemetry' })
