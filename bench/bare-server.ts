import { randomUUID } from 'node:crypto'
import Fastify from 'fastify'
import { Redis } from 'ioredis'

// The benchmark's yardsticks: Fastify with nothing added (no logger, no plugins, no schema), configured
// by BARE_BODY (a real profile's body), BARE_HEADERS (the headers a hit sends) and BARE_DELAY_MS.
const body = process.env.BARE_BODY ?? '{}'
const profile: unknown = JSON.parse(body)
const hitHeaders = JSON.parse(process.env.BARE_HEADERS ?? '{}') as Record<string, string>
const delayMs = Number(process.env.BARE_DELAY_MS ?? 0)
// Each command written as it is issued, as the service's client does (ioredis's default: no auto-pipelining).
const redis = process.env.BARE_REDIS_URL === undefined ? undefined : new Redis(process.env.BARE_REDIS_URL)
const app = Fastify()
app.get('/healthz', async () => ({ status: 'ok' }))
// Bare Fastify: a constant object, serialized per request.
app.get('/profile/:username', async () => profile)
// The floor: exactly the headers and bytes a hit sends, a fresh request id included. Nothing the
// service does on a hit can be cheaper than this.
app.get('/floor/profile/:username', (_request, reply) => {
  reply.headers(hitHeaders).header('x-request-id', randomUUID()).send(body)
})
// The floor after one read of an absent key (BARE_REDIS_URL), as the store reads a cold one: beside the floor's own
// route, what that read costs under the same load.
if (redis !== undefined) {
  app.get<{ Params: { username: string } }>('/read/profile/:username', async (request, reply) => {
    await redis.hgetall(`pbff-bench-absent:${request.params.username}`)
    return await reply.headers(hitHeaders).header('x-request-id', randomUUID()).send(body)
  })
}
// A perfect coalescer's waiter: answered exactly one upstream latency after it asked. The shelter
// burst against it is the floor that this machine and the load generator put under any waiter.
app.get('/slow/profile/:username', (_request, reply) => {
  setTimeout(() => reply.type('application/json; charset=utf-8').send(body), delayMs)
})

await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) })
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => { app.close().then(() => { redis?.disconnect(); process.exit(0) }, () => process.exit(1)) })
}
