// Run by tracing-off.test.ts in a process of its own: which modules does an app load, and what does it do? Its OTEL_*
// variables are those of the environment it was started with, if any.
import { registerHooks } from 'node:module'
import { Writable } from 'node:stream'

const loaded: string[] = []
registerHooks({
  resolve (specifier, context, nextResolve) {
    const resolved = nextResolve(specifier, context)
    if (/@opentelemetry\/(?!api\/)|@fastify\/otel|\/src\/tracing\//.test(resolved.url)) loaded.push(resolved.url)
    return resolved
  }
})

const { buildApp } = await import('../../src/app.ts')
const { loadConfig } = await import('../../src/config.ts')
const { loggerOptions } = await import('../../src/logging/logging.ts')
const { tracingConfigured } = await import('../../src/telemetry/tracing.ts')
const { startSimulator } = await import('../../dev/simulator.ts')

const sim = await startSimulator()
const lines: string[] = []
const stream = new Writable({ write (chunk: Buffer, _encoding, done) { lines.push(chunk.toString('utf8')); done() } })
const otel = Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith('OTEL_')))
const config = loadConfig({
  ...otel, UPSTREAM_BASE_URL: sim.baseUrl, AUTH_URL: sim.authUrl, CLIENT_ID: sim.options.clientId, CLIENT_SECRET: sim.options.clientSecret
})
// As server.ts builds its logger.
// No shedding on event-loop delay: loading the tracing SDK on a busy test machine may stall the loop for a second.
const app = await buildApp({ config, logger: { ...loggerOptions('info', tracingConfigured(config)), stream }, loadShedding: { maxEventLoopDelay: 0 } })
const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
const states = [
  (await app.inject({ url: '/profile/alice', headers: { traceparent } })).headers['x-cache'],
  (await app.inject({ url: '/profile/alice', headers: { traceparent } })).headers['x-cache']
]
const metrics = await app.inject('/metrics')
await app.close()
await sim.close()
process.stdout.write(JSON.stringify({
  loaded,
  states,
  opentelemetryDecorator: app.hasRequestDecorator('opentelemetry'),
  upstreamTraceparent: sim.stats.lastTraceparent ?? null,
  tokenTraceparent: sim.stats.lastTokenTraceparent ?? null,
  logsWithTrace: lines.filter((line) => line.includes('trace_id')).length,
  requestLines: lines.filter((line) => line.includes('"url":"/profile/alice"')).length,
  requestLinesInTrace: lines.filter((line) => line.includes('"url":"/profile/alice"') && line.includes('"trace_id":"0af7651916cd43dd8448eb211c80319c"')).length,
  metricsType: metrics.headers['content-type'],
  exemplars: metrics.body.includes('trace_id')
}), () => process.exit(0)) // The exporter may still be retrying towards a collector that is away: server.ts exits after close too.
