import t from 'tap'
import { loadConfig } from '../../src/config.ts'
import { RedisBus, type BusEvent } from '../../src/redis/bus.ts'
import { inSpan } from '../../src/telemetry/tracing.ts'
import { startTracing } from '../../src/tracing/sdk.ts'
import { busInstance, eventually, rawRedis, testPrefix, type TestContext } from '../helper.ts'

// A rolling deploy mixes instances from before issue 26 with newer ones on one channel: each must read the other's messages.

// Spans are recorded in this process (exported nowhere: the collector's address refuses, which costs only the spans).
startTracing(loadConfig({ UPSTREAM_BASE_URL: 'http://127.0.0.1:9', AUTH_URL: 'http://127.0.0.1:9', CLIENT_ID: 'id', CLIENT_SECRET: 'secret', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }))

/** How instances before issue 26 read a message (src/redis/bus.ts at 13af6aa): the wire format they expect. */
function decodedByAnOlderInstance (message: string, ownOrigin: string): BusEvent | undefined {
  const [code = '', origin = '', etag] = message.split(' ', 3)
  if (origin === ownOrigin || etag === undefined) return undefined
  const key = message.slice(code.length + origin.length + etag.length + 3)
  switch (code) {
    case 'f': return { type: 'filled', key, etag }
    case 's': return { type: 'staled', key }
    case 'r': return { type: 'released', key }
    default: return undefined
  }
}

async function bus (t: TestContext, channel: string): Promise<RedisBus> {
  return (await busInstance(t, channel)).events
}

t.test('a message published in a traced span carries its traceparent, and an older instance still reads it', async (t) => {
  const channel = `${testPrefix(t)}events`
  const events = await bus(t, channel)
  const listener = rawRedis(t).duplicate()
  t.teardown(() => listener.disconnect())
  const raw: string[] = []
  listener.on('message', (_from: string, message: string) => raw.push(message))
  await listener.subscribe(channel)
  let traceparent = ''
  await inSpan('cache.load', {}, async (span) => {
    const { traceId, spanId } = span.spanContext()
    traceparent = `00-${traceId}-${spanId}-01`
    await events.publish({ type: 'filled', key: 'p:v1:{a b}:profile', etag: '"tag"' })
    await events.publish({ type: 'released', key: 'p:v1:{a b}:profile' })
  })
  await events.publish({ type: 'staled', key: 'p:v1:{a b}:profile' })
  await eventually(() => raw.length === 3, 'delivered')
  t.match(raw[0], new RegExp(`^f [\\w-]+;${traceparent} "tag" p:v1:\\{a b\\}:profile$`))
  t.same(raw.map((message) => decodedByAnOlderInstance(message, 'older-instance')), [
    { type: 'filled', key: 'p:v1:{a b}:profile', etag: '"tag"' },
    { type: 'released', key: 'p:v1:{a b}:profile' },
    { type: 'staled', key: 'p:v1:{a b}:profile' }
  ], 'the etag and the key where they always were')
})

t.test('a newer instance reads an older instance\'s messages (no traceparent) and a newer one\'s', async (t) => {
  const channel = `${testPrefix(t)}events`
  const events = await bus(t, channel)
  const heard: BusEvent[] = []
  events.listen((event) => heard.push(event))
  const publisher = rawRedis(t)
  const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
  await publisher.publish(channel, 'f older "v1" p:v1:{k}:profile')
  await publisher.publish(channel, 'r older - p:v1:{k}:profile')
  await publisher.publish(channel, `r newer;${traceparent} - p:v1:{k}:profile`)
  await eventually(() => heard.length === 3, 'delivered')
  t.same(heard, [
    { type: 'filled', key: 'p:v1:{k}:profile', etag: '"v1"' },
    { type: 'released', key: 'p:v1:{k}:profile' },
    { type: 'released', key: 'p:v1:{k}:profile', traceparent }
  ])
})
