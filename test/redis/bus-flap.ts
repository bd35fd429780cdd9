import { connect, createServer, type AddressInfo, type Socket } from 'node:net'
import { setTimeout as delay } from 'node:timers/promises'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { Redis } from 'ioredis'
import { RedisBus } from '../../src/redis/bus.ts'
import { duplicateRedisClient, REDIS_OPTIONS } from '../../src/redis/client.ts'
import { RedisClock } from '../../src/redis/clock.ts'
import { RedisHealth } from '../../src/redis/health.ts'
import { cacheStack, eventually, metric, parseMetrics, rawRedis, RedisServer, type TestContext } from '../helper.ts'

const FRESH_MS = 60_000

/** Kills every subscriber connection on `redis` (as `client-output-buffer-limit pubsub` or an idle proxy would) until stopped. */
function flapSubscribers (t: TestContext, url: string): { kills: () => number, stop: () => Promise<void> } {
  const admin = rawRedis(t, url)
  let kills = 0
  const stopped = new AbortController()
  const flapping = (async () => {
    while (!stopped.signal.aborted) {
      kills += Number(await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub'))
      // The flap's period, not a wait for anything.
      await delay(100)
    }
  })()
  return { kills: () => kills, stop: async () => { stopped.abort(); await flapping } }
}

async function readiness (app: FastifyInstance): Promise<Record<string, unknown>> {
  return (await app.inject('/readyz')).json()
}

async function busUp (app: FastifyInstance): Promise<number | undefined> {
  return metric(parseMetrics((await app.inject('/metrics')).body), 'pbff_redis_bus_up')
}

t.test('a flapping bus (subscribers killed every 100 ms, Redis answering) costs no upstream call: one per freshness window, HIT or STALE', async (t) => {
  const redis = await RedisServer.start(t)
  const { app: a, another, sim, clock } = await cacheStack(t, { env: { REDIS_URL: redis.url, RATE_LIMIT_PER_MINUTE: '0', PROFILE_TTL_SECONDS: String(FRESH_MS / 1000) } })
  const b = await another()
  const flap = flapSubscribers(t, redis.url)
  await eventually(async () => (await readiness(b)).bus === 'down', '/readyz reports the bus down')
  t.match(await readiness(b), { status: 'degraded', redis: 'up', bus: 'down' }, 'degraded, Redis still up')
  t.equal(await busUp(b), 0, 'and the gauge says so')

  const cold = await Promise.all([a.inject('/profile/alice'), b.inject('/profile/alice')])
  t.same(cold.map((res) => res.statusCode), [200, 200])
  t.equal(sim.callsFor('profile', 'alice'), 1, 'a cold key: one load for both instances, the lock held without the bus')

  const answers = new Set<string>()
  // Every 3 s for 1.2 freshness windows, while the subscribers keep being killed between the questions.
  for (let asked = 0; asked < (1.2 * FRESH_MS) / 3_000; asked++) {
    const killed = flap.kills()
    if (asked % 2 === 0) await eventually(() => flap.kills() > killed, 'a subscriber killed meanwhile')
    clock.advance(3_000)
    for (const app of [a, b]) answers.add((await app.inject('/profile/alice')).headers['x-cache'] as string)
  }
  await eventually(() => sim.callsFor('profile', 'alice') === 2, 'the revalidation at the end of freshness')
  t.same([...answers].sort(), ['HIT', 'STALE'], 'never MISS')
  t.equal(sim.callsFor('profile', 'alice'), 2, 'one call per freshness window for the deployment')

  await flap.stop()
  await eventually(async () => (await readiness(b)).bus === 'up', 'the bus back')
  t.match(await readiness(b), { status: 'ready', redis: 'up', bus: 'up' })
  t.equal(await busUp(b), 1)
})

t.test('a subscriber\'s failed resubscription is the bus\'s to report, never an unhandled rejection (fleet simulation seed 8)', async (t) => {
  const redis = await RedisServer.start(t)
  const admin = rawRedis(t, redis.url)
  const client = new Redis(redis.url, REDIS_OPTIONS)
  const health = new RedisHealth({ client, clock: new RedisClock(Date.now) })
  const errors: unknown[] = []
  const bus = new RedisBus({ publisher: client, health, subscriber: duplicateRedisClient(client), channel: 'events', onError: (error) => { errors.push(error) } })
  t.teardown(async () => {
    health.close()
    await bus.close()
    await client.quit()
  })
  await eventually(() => bus.ready, 'subscribed')
  // SUBSCRIBE refused from now on, so the resubscription after the cut fails (as when the new connection drops at once).
  await admin.call('ACL', 'SETUSER', 'default', '-subscribe')
  await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub')
  // The resubscription's own refusal: an error of the cut itself may come first, before the subscriber has seen its close.
  await eventually(() => errors.some((error) => /NOPERM/.test((error as Error).message)), 'the failed resubscription reported')
  t.notOk(bus.ready, 'events known lost meanwhile')
  await admin.call('ACL', 'SETUSER', 'default', '+subscribe')
  // Unsubscribed, the subscriber's connection is an ordinary one now (the admin's own is spared).
  await admin.call('CLIENT', 'KILL', 'TYPE', 'normal')
  await eventually(() => bus.ready, 'subscribed again at the next connection')
})

/** A proxy to `port` that withholds the first SUBSCRIBE it sees (a server that took the connection, then hung): nothing answers it. */
async function subscribeSwallower (t: TestContext, port: number): Promise<{ url: string, swallowed: () => boolean, connections: () => number }> {
  let swallowed = false
  let connections = 0
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    connections++
    const upstream = connect(port, '127.0.0.1')
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on('close', () => { sockets.delete(socket); client.destroy(); upstream.destroy() })
      socket.on('error', () => {})
    }
    upstream.pipe(client)
    client.on('data', (chunk: Buffer) => {
      if (!swallowed && /^\*\d+\r\n\$9\r\nsubscribe\r\n/i.test(chunk.toString('latin1'))) swallowed = true
      else upstream.write(chunk)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    for (const socket of sockets) socket.destroy()
    await new Promise((resolve) => server.close(resolve))
  })
  return { url: `redis://127.0.0.1:${(server.address() as AddressInfo).port}`, swallowed: () => swallowed, connections: () => connections }
}

t.test('a SUBSCRIBE nobody answers drops the subscriber\'s connection, and the next one subscribes, while Redis stays up', async (t) => {
  const redis = await RedisServer.start(t)
  const proxy = await subscribeSwallower(t, Number(new URL(redis.url).port))
  const client = new Redis(redis.url, REDIS_OPTIONS)
  const health = new RedisHealth({ client, clock: new RedisClock(Date.now) })
  const errors: unknown[] = []
  const bus = new RedisBus({ publisher: client, health, subscriber: new Redis(proxy.url, { ...REDIS_OPTIONS, autoResubscribe: false }), channel: 'events', onError: (error) => { errors.push(error) } })
  t.teardown(async () => {
    health.close()
    await bus.close()
    await client.quit()
  })
  await eventually(() => proxy.swallowed(), 'the first SUBSCRIBE withheld')
  await eventually(() => errors.some((error) => /timed out/.test((error as Error).message)), 'its timeout reported')
  await eventually(() => bus.ready, 'subscribed on the next connection')
  t.equal(proxy.connections(), 2, 'one connection made again')
  t.ok(health.up, 'Redis was up all along: nothing but the bus would have made the connection again')
})
