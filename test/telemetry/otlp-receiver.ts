import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { ProxyTracerProvider, trace } from '@opentelemetry/api'

type AnyValue = { stringValue?: string, intValue?: number | string, boolValue?: boolean, doubleValue?: number }
interface KeyValue { key: string, value: AnyValue }

/** One exported span, as a test reads it: ids in hex, attributes as plain values. */
export interface ReceivedSpan {
  name: string
  traceId: string
  spanId: string
  parentSpanId: string | undefined
  /** 1 internal, 2 server, 3 client. */
  kind: number
  attributes: Record<string, string | number | boolean>
  links: Array<{ traceId: string, spanId: string }>
  service: string
  scope: string
}

export interface OtlpReceiver {
  /** What to set OTEL_EXPORTER_OTLP_ENDPOINT to. */
  endpoint: string
  spans: ReceivedSpan[]
  /** Every exported request's raw body, for the scan that nothing secret went out. */
  bodies: string[]
  close: () => Promise<void>
}

/** An OTLP/HTTP (JSON) collector in this process: it keeps what the service exports to `/v1/traces`. */
export async function otlpReceiver (): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = []
  const bodies: string[] = []
  const server = createServer((request, response) => {
    read(request).then((body) => {
      bodies.push(body)
      if (request.url === '/v1/traces') spans.push(...spansOf(JSON.parse(body)))
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    }, () => { response.writeHead(400).end() })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    bodies,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

async function read (request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of request) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] }
    scopeSpans?: Array<{
      scope?: { name?: string }
      spans?: Array<{
        name: string,
        traceId: string,
        spanId: string,
        parentSpanId?: string,
        kind: number,
        attributes?: KeyValue[],
        links?: Array<{ traceId: string, spanId: string }>
      }>
    }>
  }>
}

function spansOf (request: ExportRequest): ReceivedSpan[] {
  return (request.resourceSpans ?? []).flatMap(({ resource, scopeSpans }) => {
    const service = String(attributesOf(resource?.attributes)['service.name'])
    return (scopeSpans ?? []).flatMap(({ scope, spans }) => (spans ?? []).map((span) => ({
      name: span.name,
      traceId: span.traceId,
      spanId: span.spanId,
      parentSpanId: span.parentSpanId === undefined || span.parentSpanId === '' ? undefined : span.parentSpanId,
      kind: span.kind,
      attributes: attributesOf(span.attributes),
      links: (span.links ?? []).map(({ traceId, spanId }) => ({ traceId, spanId })),
      service,
      scope: scope?.name ?? ''
    })))
  })
}

function attributesOf (list: KeyValue[] | undefined): Record<string, string | number | boolean> {
  const attributes: Record<string, string | number | boolean> = {}
  for (const { key, value } of list ?? []) {
    const plain = value.stringValue ?? value.boolValue ?? value.doubleValue ?? value.intValue
    if (plain !== undefined) attributes[key] = typeof plain === 'string' && value.intValue !== undefined ? Number(plain) : plain
  }
  return attributes
}

/** Exports every span ended so far, through the SDK's public API (the global provider's `forceFlush`): no test waits on a timer. */
export async function flushSpans (): Promise<void> {
  const global = trace.getTracerProvider()
  const provider = global instanceof ProxyTracerProvider ? global.getDelegate() : global
  await (provider as { forceFlush?: () => Promise<void> }).forceFlush?.()
}
