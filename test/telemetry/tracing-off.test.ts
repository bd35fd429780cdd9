import { spawnSync } from 'node:child_process'
import t from 'tap'

/** What app-process.ts saw, in a process of its own with no OTEL_* variable but `otel`. */
function appProcess (otel: Record<string, string>): Record<string, unknown> & { status: number | null, stderr: string } {
  const env = { ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('OTEL_'))), ...otel }
  const run = spawnSync(process.execPath, [new URL('app-process.ts', import.meta.url).pathname], { env, encoding: 'utf8', timeout: 30_000 })
  return { ...(run.status === 0 ? JSON.parse(run.stdout) as Record<string, unknown> : {}), status: run.status, stderr: run.stderr }
}

t.test('without OTEL_* variables no tracing module is loaded, nothing is propagated and logs and metrics are as before', async (t) => {
  const seen = appProcess({})
  t.equal(seen.status, 0, seen.stderr)
  t.same(seen.loaded, [], 'no SDK, exporter, instrumentation or src/tracing/ module was even resolved')
  t.same(seen.states, ['MISS', 'HIT'])
  t.equal(seen.opentelemetryDecorator, false, 'no request hook of @fastify/otel')
  t.equal(seen.upstreamTraceparent, null, 'the caller\'s traceparent is not passed on')
  t.equal(seen.tokenTraceparent, null)
  t.equal(seen.requestLines, 2)
  t.equal(seen.logsWithTrace, 0, 'no line names a trace')
  t.equal(seen.metricsType, 'text/plain; version=0.0.4; charset=utf-8', 'the Prometheus text format, without exemplars')
  t.equal(seen.exemplars, false)
})

t.test('with a collector that cannot be reached, requests are served, the caller\'s trace is passed on and the app closes', async (t) => {
  const seen = appProcess({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' })
  t.equal(seen.status, 0, seen.stderr)
  t.ok((seen.loaded as string[]).some((url) => url.endsWith('/src/tracing/sdk.ts')), 'the SDK was loaded')
  t.same(seen.states, ['MISS', 'HIT'])
  t.match(seen.upstreamTraceparent, /^00-0af7651916cd43dd8448eb211c80319c-[\da-f]{16}-01$/, 'the upstream got the caller\'s trace')
  t.match(seen.tokenTraceparent, /^00-0af7651916cd43dd8448eb211c80319c-/)
  t.equal(seen.requestLinesInTrace, 2, 'each request\'s line names the caller\'s trace')
})

t.test('OTEL_SDK_DISABLED=true: no tracing module is loaded, whatever endpoint is set', async (t) => {
  const seen = appProcess({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:9/v1/traces' })
  t.equal(seen.status, 0, seen.stderr)
  t.same(seen.loaded, [], 'no SDK, exporter, instrumentation or src/tracing/ module was even resolved')
  t.equal(seen.upstreamTraceparent, null, 'the caller\'s traceparent is not passed on')
})

t.test('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT alone turns tracing on, as OTEL_EXPORTER_OTLP_ENDPOINT does', async (t) => {
  const seen = appProcess({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:9/v1/traces' })
  t.equal(seen.status, 0, seen.stderr)
  t.ok((seen.loaded as string[]).some((url) => url.endsWith('/src/tracing/sdk.ts')), 'the SDK was loaded')
  t.match(seen.upstreamTraceparent, /^00-0af7651916cd43dd8448eb211c80319c-[\da-f]{16}-01$/, 'the upstream got the caller\'s trace')
})
