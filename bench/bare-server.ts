import Fastify from 'fastify'

// The benchmark's yardstick: Fastify with nothing added (no logger, no plugins, no schema) answering
// the service's route with a constant body of a real profile's size. Nothing the service does on a
// cache hit can be cheaper than this. Configured by PORT, BARE_BODY and BARE_DELAY_MS.
const body = process.env.BARE_BODY ?? '{}'
const delayMs = Number(process.env.BARE_DELAY_MS ?? 0)
const app = Fastify()
app.get('/healthz', async () => ({ status: 'ok' }))
app.get('/profile/:username', (_request, reply) => {
  reply.type('application/json; charset=utf-8').send(body)
})
// A perfect coalescer's waiter: answered exactly one upstream latency after it asked. The shelter
// burst against it is the floor that this machine and the load generator put under any waiter.
app.get('/slow/profile/:username', (_request, reply) => {
  setTimeout(() => reply.type('application/json; charset=utf-8').send(body), delayMs)
})

await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) })
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => { app.close().then(() => process.exit(0), () => process.exit(1)) })
}
