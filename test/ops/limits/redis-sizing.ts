import { readFileSync } from 'node:fs'
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { parse } from 'yaml'
import { eventually, RedisServer, stack } from '../../helper.ts'

const root = new URL('../../../', import.meta.url)
const compose = parse(readFileSync(new URL('docker-compose.yml', root), 'utf8')) as { services: { redis: { command: string[] } } }
const command = compose.services.redis.command
const POLICY = command[command.indexOf('--maxmemory-policy') + 1] ?? ''
const operations = readFileSync(new URL('docs/operations.md', root), 'utf8')

/** A redis-server of the test's own (clean INFO figures), with compose's eviction policy and `maxmemory`. */
async function ownRedis (t: Test, maxmemory = '0') {
  const server = await RedisServer.start(t, ['--maxmemory', maxmemory, '--maxmemory-policy', POLICY])
  const redis = new Redis(server.url)
  t.teardown(() => redis.quit())
  return { server, redis }
}

async function usedMemory (redis: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1])
}

/** Entries reach Redis after their answers are sent: waits until all `n` of one kind are stored. */
async function stored (redis: Redis, kind: string, n: number): Promise<void> {
  await eventually(async () => (await redis.keys(`*{member-*}:${kind}`)).length === n, `${n} ${kind} entries in Redis`)
}

async function stats (redis: Redis): Promise<{ evicted: number }> {
  return { evicted: Number(/evicted_keys:(\d+)/.exec(await redis.info('stats'))?.[1]) }
}

/** Asks for `paths` through the app, `parallel` at a time; the status codes. */
async function load (app: { inject: (url: string) => Promise<{ statusCode: number }> }, paths: string[], parallel = 16): Promise<number[]> {
  const statuses: number[] = []
  for (let i = 0; i < paths.length; i += parallel) {
    statuses.push(...(await Promise.all(paths.slice(i, i + parallel).map(async (path) => (await app.inject(path)).statusCode))))
  }
  return statuses
}

const usernames = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `member-${from + i}`)

t.test('bytes per cached username, measured in Redis; docs/operations.md states them', async (t) => {
  const { server, redis } = await ownRedis(t)
  const { app, sim } = await stack(t, { env: { REDIS_URL: server.url, RATE_LIMIT_PER_MINUTE: '0' } })
  await eventually(async () => (await app.inject('/readyz')).json().redis === 'up', '/readyz says redis is up')
  await app.inject('/profile/warm-up')
  await app.inject('/profile/warm-up/timeline')
  const n = 400
  const before = await usedMemory(redis)
  t.same(new Set(await load(app, usernames(n).map((u) => `/profile/${u}`))), new Set([200]))
  await stored(redis, 'profile', n)
  const profiles = await usedMemory(redis)
  t.same(new Set(await load(app, usernames(n).map((u) => `/profile/${u}/timeline`))), new Set([200]))
  await stored(redis, 'timeline', n)
  const both = await usedMemory(redis)
  t.equal(sim.stats.dataCalls, 2 * n + 2)
  const perProfile = Math.round((profiles - before) / n)
  const perUsername = Math.round((both - before) / n)
  t.comment(`used_memory per username: ${perProfile} B with its profile, ${perUsername} B with its profile and timeline`)
  const stated = /\*\*~([\d,]+) bytes per username\*\*/.exec(operations)?.[1]
  t.ok(stated, 'docs/operations.md gives the figure')
  const figure = Number(stated?.replace(/,/g, ''))
  t.ok(Math.abs(figure - perUsername) / perUsername < 0.25, `docs/operations.md's ${figure} B is within 25% of the measured ${perUsername} B`)
})

t.test(`under memory pressure (${POLICY}) every answer is still right: cold entries are evicted and loaded again`, async (t) => {
  const { server, redis } = await ownRedis(t)
  const { app, sim } = await stack(t, { env: { REDIS_URL: server.url, RATE_LIMIT_PER_MINUTE: '0' } })
  await eventually(async () => (await app.inject('/readyz')).json().redis === 'up', '/readyz says redis is up')
  await app.inject('/profile/warm-up')
  // Room for about a hundred profiles, asked for four times as many.
  const limit = await usedMemory(redis) + 120_000
  await redis.config('SET', 'maxmemory', String(limit))
  const n = 400
  const statuses = await load(app, usernames(n).map((u) => `/profile/${u}`))
  t.same(new Set(statuses), new Set([200]), 'no request failed while Redis evicted')
  t.ok((await stats(redis)).evicted > 0, 'Redis evicted')
  t.ok(await usedMemory(redis) <= limit + 64 * 1024, 'and stayed within its limit')
  const dataCalls = sim.stats.dataCalls
  const first = await app.inject(`/profile/${usernames(1)[0]}`)
  t.equal(first.statusCode, 200)
  t.same(first.json().user.name.length > 0, true, 'an evicted username is answered again')
  t.ok(sim.stats.dataCalls <= dataCalls + 1, 'with at most one more upstream call')
})
