import Fastify from 'fastify'
import { Redis } from 'ioredis'
import { Pool } from 'undici'
import { REDIS_OPTIONS } from '../src/redis/client.ts'

// The cold miss's honest floors: bare Fastify forwarding GET /profile/:username to the upstream (BARE_UPSTREAM) over
// one undici Pool with the bearer token (BARE_AUTHORIZATION), answering its body. No validation, no cache, no
// edge: one extra loopback hop, the least any service between the caller and the upstream pays. With BARE_REDIS_URL,
// one Redis read awaited before the call and one write awaited after it, on a client with the service's options:
// the least a service sharing its cache through Redis pays on a cold miss (issue 33, point 3).
const upstream = new Pool(process.env.BARE_UPSTREAM ?? 'http://127.0.0.1:1', { connections: 64 })
const headers = { authorization: process.env.BARE_AUTHORIZATION ?? '', 'content-type': 'application/json', accept: 'application/json' }
const redis = process.env.BARE_REDIS_URL === undefined ? undefined : new Redis(process.env.BARE_REDIS_URL, REDIS_OPTIONS)
// A failed command fails its request (a 500 the harness refuses as a floor), not the process.
redis?.on('error', () => {})

const app = Fastify()
app.get('/healthz', async () => ({ status: 'ok' }))
app.get<{ Params: { username: string } }>('/profile/:username', async (request, reply) => {
  const { username } = request.params
  const key = `bare-proxy:${username}`
  if (redis !== undefined) await redis.get(key)
  const answer = await upstream.request({ method: 'GET', path: `/profile/${encodeURIComponent(username)}`, headers })
  const body = await answer.body.text()
  if (redis !== undefined) await redis.set(key, body, 'PX', 60_000)
  return await reply.code(answer.statusCode).type('application/json; charset=utf-8').send(body)
})

await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) })
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => { Promise.all([app.close(), upstream.close()]).then(() => { redis?.disconnect(); process.exit(0) }, () => process.exit(1)) })
}
