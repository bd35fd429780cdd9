import { performance } from 'node:perf_hooks'
import { setImmediate as turn } from 'node:timers/promises'
import t from 'tap'
import { Redis } from 'ioredis'
import { REDIS_OPTIONS } from '../../src/redis/client.ts'
import { cacheStack, eventually, RedisServer, testLayer, untilRedisReady } from '../helper.ts'

interface Answer { username: string, startedAt: number, ms: number, status: number }

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN

t.test('Redis hung (SIGSTOP) under traffic: no errors, nobody waits past the first detection, /readyz degraded; after SIGCONT nobody waits', async (t) => {
  const redis = await RedisServer.start(t)
  const { app, sim } = await cacheStack(t, { env: { REDIS_URL: redis.url, RATE_LIMIT_PER_MINUTE: '0' }, sim: { latencyMs: 5 } })
  const answers: Answer[] = []
  const stop = new AbortController()
  let next = 0
  // Hot usernames, and a new one now and then: loads, locks and stores happen across the hang.
  const username = (): string => next++ % 10 === 0 ? `new-${next}` : `hot-${next % 20}`
  const worker = async (): Promise<void> => {
    while (!stop.signal.aborted) {
      const name = username()
      const startedAt = performance.now()
      const res = await app.inject(`/profile/${name}`)
      answers.push({ username: name, startedAt, ms: performance.now() - startedAt, status: res.statusCode })
      await turn()
    }
  }
  const workers = Array.from({ length: 8 }, worker)
  await eventually(() => answers.length >= 200, 'traffic before the hang')

  const pausedAt = performance.now()
  redis.pause()
  await eventually(async () => (await app.inject('/readyz')).json().status === 'degraded', '/readyz degraded', 3_000)
  t.same((await app.inject('/readyz')).json(), { status: 'degraded', redis: 'down', token: 'held', breaker: 'closed' })
  const settled = (answer: Answer): boolean => answer.startedAt > pausedAt + 1_000
  await eventually(() => answers.filter(settled).length >= 300, 'traffic during the hang')

  redis.resume()
  const resumedAt = performance.now()
  const callsAtResume = sim.stats.dataCalls
  await untilRedisReady(app)
  const after = (answer: Answer): boolean => answer.startedAt > resumedAt
  await eventually(() => answers.filter(after).length >= 300, 'traffic after the hang')
  stop.abort()
  await Promise.all(workers)

  t.same(new Set(answers.map((answer) => answer.status)), new Set([200]), 'nothing but 200s')
  const during = answers.filter((answer) => settled(answer) && answer.startedAt < resumedAt).map((answer) => answer.ms)
  t.ok(median(during) < 100, `median latency after the first second of the hang: ${median(during).toFixed(1)} ms`)
  const firstDetection = Math.max(...answers.filter((answer) => answer.startedAt >= pausedAt).map((answer) => answer.ms))
  t.ok(firstDetection < 1_000, `no caller waited more than the first detection: ${firstDetection.toFixed(0)} ms`)
  const slowestAfter = Math.max(...answers.filter(after).map((answer) => answer.ms))
  t.ok(slowestAfter < 1_200, `no request slower than about a second after SIGCONT: ${slowestAfter.toFixed(0)} ms`)
  const newUsernames = answers.filter((answer) => after(answer) && answer.username.startsWith('new-')).length
  t.ok(sim.stats.dataCalls - callsAtResume <= newUsernames + 8, `after the hang, no burst: ${sim.stats.dataCalls - callsAtResume} upstream calls for ${newUsernames} new usernames`)
})

t.test('a lock command that timed out during a hang leaves a lock that frees itself within its lifetime', async (t) => {
  const server = await RedisServer.start(t)
  const clientOf = (): Redis => {
    const client = new Redis(server.url, REDIS_OPTIONS)
    client.on('error', () => {})
    t.teardown(() => client.disconnect())
    return client
  }
  const prefix = 'hang-test:'
  const key = `${prefix}{u}:profile`
  const late = await testLayer(t, clientOf(), prefix)
  const other = await testLayer(t, clientOf(), prefix)
  server.pause()
  const claimedAt = performance.now()
  t.equal(await late.lock.claim(key), undefined, 'the claim timed out: this instance goes alone')
  t.ok(performance.now() - claimedAt < 1_000, 'within the command timeout')
  t.equal(late.health.up, false, 'and Redis is marked down at once')
  t.equal(await late.lock.claim(key), undefined, 'from then on, nothing is sent')
  server.resume()
  await eventually(() => other.health.up && late.health.up, 'both see Redis again')
  const waitedFrom = performance.now()
  let claim = await other.lock.claim(key)
  while (claim?.owner === false) {
    await claim.settled
    claim = await other.lock.claim(key)
  }
  t.equal(claim?.owner, true, 'the lock is free')
  t.ok(performance.now() - waitedFrom < 1_200, `after at most the lock's lifetime: ${(performance.now() - waitedFrom).toFixed(0)} ms`)
  if (claim?.owner === true) await claim.release()
})

t.test('an owner renews its lock while its job runs: a waiter is not let through by the lock\'s short lifetime', async (t) => {
  const server = await RedisServer.start(t)
  const client = new Redis(server.url, REDIS_OPTIONS)
  t.teardown(() => client.disconnect())
  const a = await testLayer(t, client, 'renew-test:', 200)
  const b = await testLayer(t, client, 'renew-test:', 200)
  const owner = await a.lock.claim('k')
  t.equal(owner?.owner, true)
  for (let i = 0; i < 3; i++) {
    const waiter = await b.lock.claim('k')
    t.equal(waiter?.owner, false, `still held after ${i + 1} lifetimes`)
    if (waiter?.owner === false) await waiter.settled
  }
  if (owner?.owner === true) await owner.release()
  t.equal((await b.lock.claim('k'))?.owner, true, 'free once released')
})
