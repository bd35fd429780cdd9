import t, { type Test } from 'tap'
import type { RateCount } from '../../../src/rate-limit/rate-counts.ts'
import { SharedRateCounts, type SharedRateCountsOptions } from '../../../src/rate-limit/shared-rate-counts.ts'
import { fakeHealth, testRedis } from '../../helper.ts'

type CountsRedis = SharedRateCountsOptions['redis']

const MINUTE = 60_000
/** 15 s into a minute: 45 s left in the window. */
const START = 1_000 * MINUTE + 15_000

/** Counts synced only when the test says so (an hour between timer syncs), on a clock the test moves. */
function counts (t: Test, redis: CountsRedis, keyPrefix: string, clock = { now: START }, health = fakeHealth()) {
  const errors: unknown[] = []
  const store = new SharedRateCounts({ redis, health, keyPrefix, windowMs: MINUTE, syncIntervalMs: 3_600_000, now: () => clock.now, onError: (error) => errors.push(error) })
  t.teardown(() => store.close())
  const incr = async (client: string): Promise<RateCount | undefined> => await new Promise((resolve) => { store.add(client, 1, resolve) })
  return { store, incr, errors, clock, health }
}

/** The store answers an error until its client is connected. */
async function connected (t: Test) {
  const fixture = testRedis(t)
  await fixture.redis.ping()
  return fixture
}

t.test('two instances count into one budget: nobody waits for Redis; a first request is sent at once, later ones synced', async (t) => {
  const { redis, prefix } = await connected(t)
  const a = counts(t, redis, prefix)
  const b = counts(t, redis, prefix)
  t.same(await a.incr('10.0.0.1'), { current: 1, ttl: 45_000 }, 'counted here at once; the ms left in the aligned window')
  t.equal((await a.incr('10.0.0.1'))?.current, 2)
  t.equal((await a.incr('10.0.0.1'))?.current, 3, 'counted here, not yet in Redis')
  t.equal((await b.incr('10.0.0.1'))?.current, 1, 'b\'s first request is counted here: Redis answers it in the background')
  await b.store.sync()
  t.equal((await b.incr('10.0.0.1'))?.current, 3, 'then b knows a\'s first request too')
  await a.store.sync()
  t.equal((await a.incr('10.0.0.1'))?.current, 5, 'a\'s sync added its two and read b\'s first back')
  await Promise.all([a.store.sync(), b.store.sync()])
  t.equal(Number(await redis.get(`${prefix}10.0.0.1:${Math.floor(START / MINUTE)}`)), 6, 'every request counted once in Redis')
  t.equal((await a.incr('10.0.0.2'))?.current, 1, 'another client has its own count')
})

t.test('a new window starts every count again; Redis expires the old one', async (t) => {
  const { redis, prefix } = await connected(t)
  const a = counts(t, redis, prefix)
  await a.incr('10.0.0.1')
  await a.incr('10.0.0.1')
  a.clock.now = START + 45_000
  t.same(await a.incr('10.0.0.1'), { current: 1, ttl: MINUTE })
  const expiresIn = await redis.pttl(`${prefix}10.0.0.1:${Math.floor(START / MINUTE)}`)
  t.ok(expiresIn > 40_000 && expiresIn <= 50_000, `the end of its window, with 5 s of slack for skewed clocks: ${expiresIn} ms`)
})

/** A Redis whose connection and commands the test controls. */
function fakeRedis () {
  const values = new Map<string, number>()
  const redis = {
    failing: false,
    incrby: async (key: string, count: number) => {
      if (redis.failing) throw new Error('Command timed out')
      values.set(key, (values.get(key) ?? 0) + count)
      return values.get(key) ?? 0
    },
    pexpire: async () => redis.failing ? await Promise.reject(new Error('Command timed out')) : 1
  }
  return { redis, total: () => [...values.values()].reduce((sum, value) => sum + value, 0) }
}

t.test('while Redis is down, each instance counts alone without sending anything; Redis gets the counts back', async (t) => {
  const { redis, total } = fakeRedis()
  const a = counts(t, redis as unknown as CountsRedis, 'p:')
  t.equal((await a.incr('10.0.0.1'))?.current, 1)
  a.health.up = false
  redis.failing = true
  t.equal((await a.incr('10.0.0.1'))?.current, 2, 'a known client goes on from its count')
  t.equal((await a.incr('10.0.0.2'))?.current, 1, 'a new client is counted here')
  t.equal((await a.incr('10.0.0.2'))?.current, 2)
  await a.store.sync()
  t.same(a.errors, [], 'no command was tried')
  a.health.up = true
  redis.failing = false
  await a.store.sync()
  t.equal(total(), 4, 'every request counted once in Redis after it is back')
})

t.test('a failed first count is let through and not sent again; a failed sync keeps its counts for the next one', async (t) => {
  const { redis, total } = fakeRedis()
  const a = counts(t, redis as unknown as CountsRedis, 'p:')
  redis.failing = true
  t.equal((await a.incr('10.0.0.1'))?.current, 1, 'counted here: nobody waits for Redis')
  await a.store.sync()
  t.equal(a.errors.length, 1, 'reported')
  redis.failing = false
  t.equal((await a.incr('10.0.0.1'))?.current, 2, 'counted on here')
  await a.incr('10.0.0.1')
  redis.failing = true
  await a.store.sync()
  t.equal(a.errors.length, 2, 'reported')
  t.equal(total(), 0, 'not added')
  t.equal((await a.incr('10.0.0.1'))?.current, 4, 'still counted here')
  redis.failing = false
  await a.store.close()
  t.equal(total(), 3, 'added with the next sync (closing syncs), but not the first: a command that timed out may have reached Redis')
})

t.test('a burst from a new client costs one Redis read, and each request gets its own place in the count', async (t) => {
  const { redis, total } = fakeRedis()
  let reads = 0
  const counting = { ...redis, incrby: async (key: string, count: number) => { reads++; return await redis.incrby(key, count) } }
  const a = counts(t, counting as unknown as CountsRedis, 'p:')
  const burst = await Promise.all(Array.from({ length: 50 }, async () => await a.incr('10.0.0.9')))
  t.equal(reads, 1, 'one read for fifty requests')
  t.same(burst.map((count) => count?.current), Array.from({ length: 50 }, (_, i) => i + 1))
  t.equal(total(), 1, 'the first one in Redis')
  await a.store.sync()
  t.equal(total(), 50, 'the others with the next sync')
})

t.test('a client idle for a sync starts again from its last known count: pacing requests a sync apart is still refused', async (t) => {
  const { redis, total } = fakeRedis()
  const a = counts(t, redis as unknown as CountsRedis, 'p:')
  const currents = []
  for (let i = 0; i < 4; i++) {
    currents.push((await a.incr('10.0.0.1'))?.current)
    // Two syncs: the first sends its count, the second finds the client idle.
    await a.store.sync()
    await a.store.sync()
  }
  t.same(currents, [1, 2, 3, 4], 'each request counted on from the one before')
  t.equal(total(), 4)
  a.clock.now = START + 45_000
  t.equal((await a.incr('10.0.0.1'))?.current, 1, 'until the window ends')
})
