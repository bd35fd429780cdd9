import Fastify from 'fastify'
import { Pool } from 'undici'

// The cold miss's honest floor: bare Fastify forwarding GET /profile/:username to the upstream (BARE_UPSTREAM) over
// one undici Pool with the bearer token (BARE_AUTHORIZATION), answering its body. No validation, no cache, no
// edge: one extra loopback hop, the least any service between the caller and the upstream pays.
const upstream = new Pool(process.env.BARE_UPSTREAM ?? 'http://127.0.0.1:1', { connections: 64 })
const headers = { authorization: process.env.BARE_AUTHORIZATION ?? '', 'content-type': 'application/json', accept: 'application/json' }
const app = Fastify()
app.get('/healthz', async () => ({ status: 'ok' }))
app.get<{ Params: { username: string } }>('/profile/:username', async (request, reply) => {
  const answer = await upstream.request({ method: 'GET', path: `/profile/${encodeURIComponent(request.params.username)}`, headers })
  const body = await answer.body.text()
  return await reply.code(answer.statusCode).type('application/json; charset=utf-8').send(body)
})

await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) })
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => { Promise.all([app.close(), upstream.close()]).then(() => process.exit(0), () => process.exit(1)) })
}
