import { setTimeout as sleep } from 'node:timers/promises'
import { context, propagation, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici'
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace'
import { FastifyOtelInstrumentation } from '@fastify/otel'
import type { FastifyPluginCallback } from 'fastify'
import type { Config } from '../config.ts'
import { startSpans, tracesEndpoint } from '../telemetry/tracing.ts'
import { traceRedisCommands } from './redis-spans.ts'
import { resourceOf, samplerOf } from './sampler.ts'
import { serverSpan } from './server-span.ts'

export interface Tracing {
  /** The Fastify plugin that makes each request's server span (`@fastify/otel`); register it before the routes. */
  plugin: FastifyPluginCallback
  /** Exports the spans ended so far. */
  flush: () => Promise<void>
}

/** Routes polled by machines every few seconds: a span each would bury the requests worth reading. */
const UNTRACED = new Set(['/healthz', '/readyz', '/metrics'])

let started: Tracing | undefined

/**
 * The OpenTelemetry SDK, started once per process (it is the API's global provider: several apps in one process, as
 * in the tests, share it, with the first one's configuration). Loaded only by plugins/tracing.ts, and only when
 * tracing is configured (`tracingConfigured`), so that otherwise no SDK module is even imported.
 */
export function startTracing (config: Config): Tracing {
  started ??= start(config)
  return started
}

function start (config: Config): Tracing {
  const provider = new TracerProvider({
    resource: resourceOf(config),
    sampler: samplerOf(config),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: tracesEndpoint(config) }) })]
  })
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  trace.setGlobalTracerProvider(provider)
  // Client spans for the upstream and the identity provider, each sending its traceparent; only for traced work.
  new UndiciInstrumentation({ requireParentforSpans: true }).enable()
  traceRedisCommands(trace.getTracer('profile-bff.redis'))
  const fastify = new FastifyOtelInstrumentation({
    instrumentHooks: false,
    instrumentHandler: false,
    ignorePaths: ({ url }) => UNTRACED.has(url.split('?', 1)[0] ?? url),
    requestHook: serverSpan
  })
  startSpans()
  return { plugin: fastify.plugin(), flush: async () => { await Promise.race([provider.forceFlush(), flushTimeout()]) } }
}

/** A collector that does not answer delays a shutdown by this much at most (the exporter itself would retry for 10 s). */
const FLUSH_TIMEOUT_MS = 1_000

async function flushTimeout (): Promise<never> {
  await sleep(FLUSH_TIMEOUT_MS, undefined, { ref: false })
  throw new Error(`the collector took more than ${FLUSH_TIMEOUT_MS} ms`)
}
