import t, { type Test } from 'tap'
import { CACHE_UNAVAILABLE } from '../../../src/errors.ts'
import type { RateCount } from '../../../src/rate-limit/rate-counts.ts'
import { ADD_COUNTS, SharedRateCounts, type SharedRateCountsOptions } from '../../../src/rate-limit/shared-rate-counts.ts'
import { fakeHealth, testRedis } from '../../helper.ts'

type CountsRedis = SharedRateCountsOptions['redis']

const MINUTE = 60_000
/** 15 s into a minute: 45 s left in the window. */
const START = 1_000 * MINUTE + 15_000
const WINDOW = Math.floor(START / MINUTE)

/** Counts synced only when the test says so (an hour between timer syncs), on a clock the test moves. */
function counts (t: Test, redis: CountsRedis, keyPrefix: string, clock = { now: START }, health = fakeHealth()) {
  const errors: unknown[] = []
  const store = new SharedRateCounts({ redis, health, keyPrefix, windowMs: MINUTE, syncIntervalMs: 3_600_000, now: () => clock.now, onError: (error) => errors.push(error) })
  t.teardown(() => store.close())
  const incr = (client: string): RateCount => store.add(client, 1)
  return { store, incr, errors, clock, health }
}

/** The store answers an error until its client is connected. */
async function connected (t: Test) {
  const fixture = testRedis(t)
  await fixture.redis.ping()
  return fixture
}

t.test('two instances count into one budget: nobody waits for Redis; each sync adds its counts and reads the deployment\'s back', async (t) => {
  const { redis, prefix } = await connected(t)
  const a = counts(t, redis, prefix)
  const b = counts(t, redis, prefix)
  t.same(a.incr('10.0.0.1'), { current: 1, ttl: 45_000 }, 'counted here at once; the ms left in the aligned window')
  t.equal(a.incr('10.0.0.1').current, 2)
  t.equal(a.incr('10.0.0.1').current, 3, 'counted here, not yet in Redis')
  t.equal(await redis.exists(`${prefix}${WINDOW}`), 0, 'nothing sent before a sync')
  t.equal(b.incr('10.0.0.1').current, 1, 'b counts its first request here')
  await a.store.sync()
  await b.store.sync()
  t.equal(b.incr('10.0.0.1').current, 5, 'b\'s sync added its one and read a\'s three back')
  t.equal(a.incr('10.0.0.1').current, 4, 'a has not synced since')
  await b.store.sync()
  await a.store.sync()
  t.equal(a.incr('10.0.0.1').current, 7, 'a\'s sync read b\'s second request back')
  await Promise.all([a.store.sync(), b.store.sync()])
  t.same(await redis.hgetall(`${prefix}${WINDOW}`), { '10.0.0.1': '7' }, 'one hash per window, every request counted once')
  t.equal(a.incr('10.0.0.2').current, 1, 'another client has its own count')
})

t.test('a new window starts every count again; Redis expires the old one', async (t) => {
  const { redis, prefix } = await connected(t)
  const a = counts(t, redis, prefix)
  a.incr('10.0.0.1')
  a.incr('10.0.0.1')
  await a.store.sync()
  a.clock.now = START + 45_000
  t.same(a.incr('10.0.0.1'), { current: 1, ttl: MINUTE })
  const expiresIn = await redis.pttl(`${prefix}${WINDOW}`)
  t.ok(expiresIn > 49_000 && expiresIn <= 50_000, `the end of its window, with 5 s of slack for skewed clocks: ${expiresIn} ms`)
})

/** How a command fails, as the Redis layer reports it: never sent (Redis down), or sent and not answered (it may have run). */
const NOT_SENT = new CACHE_UNAVAILABLE('redis is down')
const TIMED_OUT = new CACHE_UNAVAILABLE('a redis command failed', { cause: new Error('Command timed out') })

/**
 * A Redis whose commands the test controls: it runs ADD_COUNTS and counts the commands; `failing` fails them (after
 * running, for a timeout); `holding` holds each reply until `release()`.
 */
function fakeRedis () {
  const values = new Map<string, number>()
  const held: Array<() => void> = []
  const redis = {
    failing: undefined as Error | undefined,
    holding: false,
    commands: 0,
    /** Each command's ARGV (client, count, ..., then the ms to keep the window). */
    sent: [] as Array<Array<string | number>>,
    eval: async (script: string, _keys: number, key: string, ...args: Array<string | number>) => {
      redis.commands++
      redis.sent.push(args)
      if (script !== ADD_COUNTS) throw new Error('not the counts\' script')
      if (redis.failing === NOT_SENT) throw redis.failing
      const counts: number[] = []
      for (let i = 0; i + 1 < args.length; i += 2) {
        const field = `${key} ${String(args[i])}`
        values.set(field, (values.get(field) ?? 0) + Number(args[i + 1]))
        counts.push(values.get(field) ?? 0)
      }
      if (redis.failing !== undefined) throw redis.failing
      if (redis.holding) await new Promise<void>((resolve) => held.push(resolve))
      return counts
    }
  }
  /** Answers the held replies, in the order sent or (`reversed`) the last first, as a redirected command may be. */
  const release = async (reversed = false): Promise<void> => {
    const answers = held.splice(0)
    for (const answer of reversed ? answers.reverse() : answers) {
      answer()
      await new Promise(setImmediate)
    }
  }
  return { redis, release, total: () => [...values.values()].reduce((sum, value) => sum + value, 0) }
}

t.test('while Redis is down, each instance counts alone without sending anything; Redis gets the counts back', async (t) => {
  const { redis, total } = fakeRedis()
  const a = counts(t, redis as unknown as CountsRedis, 'p:')
  t.equal(a.incr('10.0.0.1').current, 1)
  a.health.up = false
  redis.failing = NOT_SENT
  t.equal(a.incr('10.0.0.1').current, 2, 'a known client goes on from its count')
  t.equal(a.incr('10.0.0.2').current, 1, 'a new client is counted here')
  t.equal(a.incr('10.0.0.2').current, 2)
  await a.store.sync()
  t.same(a.errors, [], 'no command was tried')
  t.equal(redis.commands, 0)
  a.health.up = true
  redis.failing = undefined
  await a.store.sync()
  t.equal(total(), 4, 'every request counted once in Redis after it is back')
})

t.test('while Redis is down, the clients held for the next sync are bounded: past the bound the first seen leaves, its count kept here', async (t) => {
  const { redis, total } = fakeRedis()
  const health = fakeHealth()
  health.up = false
  const store = new SharedRateCounts({ redis: redis as unknown as CountsRedis, health, keyPrefix: 'p:', windowMs: MINUTE, syncIntervalMs: 3_600_000, maxClients: 3, now: () => START, onError: t.error })
  t.teardown(() => store.close())
  for (const client of ['a', 'a', 'b', 'c']) store.add(client, 1)
  await store.sync()
  store.add('d', 1)
  health.up = true
  await store.sync()
  t.equal(redis.commands, 1, 'one sync once Redis is back')
  const clients = (redis.sent[0] ?? []).slice(0, -1).filter((_, i) => i % 2 === 0)
  t.same(clients.sort(), ['b', 'c', 'd'], 'it carries the three held clients: a left them for d')
  t.equal(total(), 3, 'a\'s two requests never reach Redis')
  t.equal(store.add('a', 1).current, 3, 'a\'s two requests were kept here as an idle client\'s')
  t.equal(store.add('b', 1).current, 2, 'b, pushed out for a in turn, comes back with its count')
})

t.test('a client pushed out of the syncs while its count is on its way to Redis keeps that count here', async (t) => {
  const { redis, release } = fakeRedis()
  const store = new SharedRateCounts({ redis: redis as unknown as CountsRedis, health: fakeHealth(), keyPrefix: 'p:', windowMs: MINUTE, syncIntervalMs: 3_600_000, maxClients: 1, now: () => START, onError: t.error })
  t.teardown(() => store.close())
  store.add('x', 1)
  store.add('x', 1)
  redis.holding = true
  const syncing = store.sync()
  t.equal(store.add('y', 1).current, 1, 'y takes the one place: x leaves it with its two requests in flight')
  t.equal(store.add('x', 1).current, 3, 'x comes back counting the two on their way')
  redis.holding = false
  await release()
  await syncing
  t.equal(store.add('x', 1).current, 4, 'and Redis\'s answer for them takes nothing back')
})

t.test('a sync that never reached Redis keeps its counts for the next one; one that timed out is not sent again', async (t) => {
  const { redis, total } = fakeRedis()
  const a = counts(t, redis as unknown as CountsRedis, 'p:')
  redis.failing = NOT_SENT
  t.equal(a.incr('10.0.0.1').current, 1, 'counted here: nobody waits for Redis')
  await a.store.sync()
  t.equal(a.errors.length, 1, 'reported')
  t.equal(total(), 0, 'not added')
  t.equal(a.incr('10.0.0.1').current, 2, 'still counted here')
  redis.failing = TIMED_OUT
  await a.store.sync()
  t.equal(a.errors.length, 2, 'reported')
  t.equal(total(), 2, 'Redis added it before the reply was lost')
  redis.failing = undefined
  t.equal(a.incr('10.0.0.1').current, 3, 'counted on here')
  await a.store.close()
  t.equal(total(), 3, 'the next sync (closing syncs) adds only what came since: nothing counted twice')
})

t.test('a count on its way to Redis is part of the client\'s count, and keeps the client in the syncs', async (t) => {
  const { redis, release, total } = fakeRedis()
  const a = counts(t, redis as unknown as CountsRedis, 'p:')
  redis.holding = true
  a.incr('10.0.0.1')
  a.incr('10.0.0.1')
  const first = a.store.sync()
  t.equal(a.incr('10.0.0.1').current, 3, 'the two in flight, and this one')
  const second = a.store.sync()
  const third = a.store.sync()
  t.equal(redis.commands, 2, 'the third sync had nothing new to send, and kept the client though nothing was pending')
  redis.holding = false
  await release()
  await Promise.all([first, second, third])
  t.equal(total(), 3)
  t.equal(a.incr('10.0.0.1').current, 4, 'counted on from the deployment\'s three, not from a count forgotten')
})

t.test('a burst from a new client costs nothing until the sync, and each request gets its own place in the count', async (t) => {
  const { redis, total } = fakeRedis()
  const a = counts(t, redis as unknown as CountsRedis, 'p:')
  const burst = Array.from({ length: 50 }, () => a.incr('10.0.0.9').current)
  t.same(burst, Array.from({ length: 50 }, (_, i) => i + 1))
  t.equal(redis.commands, 0, 'no command for the burst')
  await a.store.sync()
  t.equal(redis.commands, 1)
  t.equal(total(), 50, 'all fifty with the sync')
})

t.test('a crowd of new clients costs one command per 500 clients a sync, not one per client', async (t) => {
  const { redis, total } = fakeRedis()
  const a = counts(t, redis as unknown as CountsRedis, 'p:')
  const clients = Array.from({ length: 1_200 }, (_, i) => `10.1.${i >> 8}.${i & 255}`)
  for (const client of clients) a.incr(client)
  await a.store.sync()
  t.equal(redis.commands, 3, '1,200 clients in three commands')
  t.equal(total(), 1_200)
  for (const client of clients) a.incr(client)
  await a.store.sync()
  t.equal(redis.commands, 6, 'and again at the next sync')
  t.equal(a.incr(clients[1_199] as string).current, 3, 'each client\'s count read back')
})

t.test('a client idle for a sync starts again from its last known count: pacing requests a sync apart is still refused', async (t) => {
  const { redis, total } = fakeRedis()
  const a = counts(t, redis as unknown as CountsRedis, 'p:')
  const currents = []
  for (let i = 0; i < 4; i++) {
    currents.push(a.incr('10.0.0.1').current)
    // Two syncs: the first sends its count, the second finds the client idle.
    await a.store.sync()
    await a.store.sync()
  }
  t.same(currents, [1, 2, 3, 4], 'each request counted on from the one before')
  t.equal(total(), 4)
  a.clock.now = START + 45_000
  t.equal(a.incr('10.0.0.1').current, 1, 'until the window ends')
})

t.test('an older answer read late never takes a count back', async (t) => {
  const { redis, release } = fakeRedis()
  const a = counts(t, redis as unknown as CountsRedis, 'p:')
  redis.holding = true
  a.incr('10.0.0.1')
  const first = a.store.sync()
  a.incr('10.0.0.1')
  const second = a.store.sync()
  redis.holding = false
  await release(true)
  await Promise.all([first, second])
  t.equal(a.incr('10.0.0.1').current, 3, 'the second answer (2) stands after the first (1)')
})

t.test('a sync after its window ended sends nothing: nobody reads those counts', async (t) => {
  const { redis, total } = fakeRedis()
  const a = counts(t, redis as unknown as CountsRedis, 'p:')
  a.incr('10.0.0.1')
  a.clock.now = START + 45_000
  await a.store.sync()
  t.equal(redis.commands, 0)
  t.equal(total(), 0)
  t.equal(a.incr('10.0.0.1').current, 1, 'the new window counts from nothing')
})

t.test('the shared budget holds within one sync interval\'s slack, whatever the instances, the limit and their clocks\' skew', async (t) => {
  for (const instances of [1, 2, 3, 5]) {
    for (const limit of [3, 60]) {
      for (const skewMs of [0, 500, 2_000]) {
        const { redis } = fakeRedis()
        // Each instance's clock `skewMs` apart from the last, all within the window (15 s in, 45 s left).
        const fleet = Array.from({ length: instances }, (_, index) => counts(t, redis as unknown as CountsRedis, 'p:', { now: START + index * skewMs }))
        let admitted = 0
        // Each sync interval, every instance gets one request from the client, then every instance syncs.
        for (let interval = 0; interval < limit + instances; interval++) {
          for (const instance of fleet) if (instance.incr('10.0.0.1').current <= limit) admitted++
          for (const instance of fleet) await instance.store.sync()
        }
        const label = `${instances} instance(s), limit ${limit}, clocks ${skewMs} ms apart`
        t.ok(admitted >= limit, `${label}: the budget is granted (${admitted})`)
        t.ok(admitted <= limit + instances - 1, `${label}: at most one interval's requests on the others beyond it (${admitted})`)
      }
    }
  }
})
