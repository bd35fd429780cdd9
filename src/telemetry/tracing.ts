import { SpanStatusCode, trace, TraceFlags, type Attributes, type Span, type SpanContext } from '@opentelemetry/api'
import type { Config } from '../config.ts'

/**
 * The spans the logic makes, through the OpenTelemetry API only. Until the tracing SDK is started (never
 * without OTEL_EXPORTER_OTLP_ENDPOINT) these are the API's no-op spans: nothing is recorded or exported.
 * Only misses, loads and upstream calls use them; a hit held in this process never does.
 */
const tracer = trace.getTracer('profile-bff')

type TracingSettings = Pick<Config, 'OTEL_SDK_DISABLED' | 'OTEL_EXPORTER_OTLP_ENDPOINT' | 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'>

/**
 * Where spans go, as OpenTelemetry's OTLP/HTTP exporter reads the standard variables: the traces endpoint as it is,
 * else `{endpoint}/v1/traces`. Undefined, tracing is off: no collector, or OTEL_SDK_DISABLED=true.
 */
export function tracesEndpoint (config: TracingSettings): string | undefined {
  if (config.OTEL_SDK_DISABLED) return undefined
  if (config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined) return config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
  if (config.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined) return `${config.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces`
  return undefined
}

/** Tracing is on with a collector to send spans to, unless disabled; otherwise no tracing SDK module is loaded at all. */
export function tracingConfigured (config: TracingSettings): boolean {
  return tracesEndpoint(config) !== undefined
}

/** Set once the SDK is started: until then `inSpan` runs its work at once, without a span or a context switch. */
let recording = false

/** Called by the tracing SDK's start (src/tracing/), once it is the global tracer provider. */
export function startSpans (): void {
  recording = true
}

const NO_SPAN = trace.wrapSpanContext({ traceId: '', spanId: '', traceFlags: 0 })

/** The W3C `traceparent` of `spanContext`: how a span is named to another process (a bus message, a header). */
function traceparentOf ({ traceId, spanId, traceFlags }: SpanContext): string {
  return `00-${traceId}-${spanId}-${traceFlags.toString(16).padStart(2, '0')}`
}

const TRACEPARENT = /^00-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})$/

/** The span context a `traceparent` names; undefined when it names none (absent, malformed, or all zeros). */
function spanContextOf (traceparent: string | undefined): SpanContext | undefined {
  const [, traceId = '', spanId = '', flags = ''] = TRACEPARENT.exec(traceparent ?? '') ?? []
  const spanContext = { traceId, spanId, traceFlags: Number.parseInt(flags, 16), isRemote: true }
  return trace.isSpanContextValid(spanContext) ? spanContext : undefined
}

/** The `traceparent` of the span this code runs in; undefined when tracing is off or no span is recording. */
export function currentTraceparent (): string | undefined {
  const span = trace.getActiveSpan()
  return span?.isRecording() === true ? traceparentOf(span.spanContext()) : undefined
}

/** The span this code runs in (a no-op span when there is none): to name what it found out, such as a coalescer's role. */
export function currentSpan (): Span {
  return trace.getActiveSpan() ?? NO_SPAN
}

/** Links `span` to the span `traceparent` names (the load that answered a waiter), if it names one. */
export function linkTo (span: Span, traceparent: string | undefined): void {
  const linked = spanContextOf(traceparent)
  if (linked !== undefined) span.addLink({ context: linked })
}

/** `work` in a span of its own (a child of the current one), ended when it settles; a failure marks it. */
export function inSpan<T> (name: string, attributes: Attributes, work: (span: Span) => Promise<T>): Promise<T> {
  // Not an async function: with tracing off, the work's own promise is returned, with nothing wrapped around it.
  if (!recording) return work(NO_SPAN)
  return tracer.startActiveSpan(name, { attributes }, async (span) => {
    try {
      return await work(span)
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : 'failed' })
      throw error
    } finally {
      span.end()
    }
  })
}

/** The ids a log line or a latency sample names its trace by: those of the span this code runs in, if any. */
export function traceIds (): { trace_id: string, span_id: string } | undefined {
  const spanContext = trace.getActiveSpan()?.spanContext()
  return spanContext === undefined || !trace.isSpanContextValid(spanContext)
    ? undefined
    : { trace_id: spanContext.traceId, span_id: spanContext.spanId }
}

/** As `traceIds`, only for a sampled trace: an exemplar must lead to a trace the store has. */
export function sampledTraceIds (): { trace_id: string, span_id: string } | undefined {
  const spanContext = trace.getActiveSpan()?.spanContext()
  return spanContext === undefined || (spanContext.traceFlags & TraceFlags.SAMPLED) === 0
    ? undefined
    : { trace_id: spanContext.traceId, span_id: spanContext.spanId }
}
