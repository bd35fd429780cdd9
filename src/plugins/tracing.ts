import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { tracingConfigured } from '../telemetry/tracing.ts'

/**
 * Traces (docs/operations.md, "Tracing"): with a collector (`tracesEndpoint`), the OpenTelemetry SDK is loaded and started, and
 * every request gets a server span carrying its cache state; without it this plugin registers nothing and no
 * tracing module is imported. Registered before the routes, whose requests its hooks see.
 */
async function tracing (app: FastifyInstance): Promise<void> {
  if (!tracingConfigured(app.config)) return
  const { startTracing } = await import('../tracing/sdk.ts')
  const { plugin, flush } = startTracing(app.config)
  await app.register(plugin)
  // Before @fastify/otel's own onSend, which ends the span: a hit's whole story is this one attribute.
  app.addHook('onSend', (request, reply, payload, done) => {
    const state = reply.getHeader('x-cache')
    if (typeof state === 'string') request.opentelemetry().span?.setAttribute('pbff.cache.state', state)
    done(null, payload)
  })
  // A collector that is away costs the traces, never the shutdown.
  app.addHook('onClose', async () => { await flush().catch((err: unknown) => { app.log.warn({ err }, 'spans not exported on close') }) })
}

export default fp(tracing, { name: 'tracing', dependencies: ['config'] })
