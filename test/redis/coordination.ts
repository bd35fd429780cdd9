import { mock } from 'node:test'
import t from 'tap'
import { Redis } from 'ioredis'
import { createEntry, type CacheEntry } from '../../src/cache/cache-entry.ts'
import type { CacheDriver } from '../../src/cache/driver.ts'
import { RedisBus, type BusEvent } from '../../src/redis/bus.ts'
import { RedisHealth } from '../../src/redis/health.ts'
import { OwnerLock } from '../../src/redis/owner-lock.ts'
import { busInstance, Clock, eventually, settle, sharedTier, testPrefix } from '../helper.ts'

function lockOf ({ redis, health, events }: { redis: Redis, health: RedisHealth, events: RedisBus }, ttlMs: number): OwnerLock {
  return new OwnerLock({ redis, health, bus: events, ttlMs, onError: () => {} })
}

/** A probe of whether a promise has settled yet. */
function watch (promise: Promise<unknown>): () => boolean {
  let done = false
  promise.then(() => { done = true }, () => { done = true })
  return () => done
}

t.test('events reach the other instances, never the sender, whatever the key holds', async (t) => {
  const channel = `${testPrefix(t)}events`
  const a = await busInstance(t, channel)
  const b = await busInstance(t, channel)
  const heardByA: BusEvent[] = []
  const heardByB: BusEvent[] = []
  a.events.listen((event) => heardByA.push(event))
  b.events.listen((event) => heardByB.push(event))
  const sent: BusEvent[] = [
    { type: 'filled', key: 'p:v1:{a b}:profile', etag: '"tag"' },
    { type: 'staled', key: 'p:v1:{x}:timeline' },
    { type: 'released', key: 'prefix with spaces: v1:{y}:profile' }
  ]
  for (const event of sent) await a.events.publish(event)
  await eventually(() => heardByB.length === sent.length, 'delivered')
  t.same(heardByB, sent)
  t.same(heardByA, [])
})

t.test('a waiting instance is woken by the owner\'s release, not by a timer', async (t) => {
  const channel = `${testPrefix(t)}events`
  const key = `${testPrefix(t)}v1:{w}:profile`
  const a = await busInstance(t, channel)
  const b = await busInstance(t, channel)
  const lockTtlMs = 60_000
  const owner = lockOf(a, lockTtlMs)
  const other = lockOf(b, lockTtlMs)

  const first = await owner.claim(key)
  const second = await other.claim(key)
  if (first?.owner !== true || second?.owner !== false) throw new Error('expected one owner and one waiter')
  const woken = watch(second.settled)
  // Another key's release reaches the waiter's instance first (one channel keeps its order): it wakes only its own waiter.
  const otherKey = `${testPrefix(t)}v1:{w2}:profile`
  const otherFirst = await owner.claim(otherKey)
  const otherSecond = await other.claim(otherKey)
  if (otherFirst?.owner !== true || otherSecond?.owner !== false) throw new Error('expected one owner and one waiter')
  await otherFirst.release()
  await otherSecond.settled
  t.equal(woken(), false, 'the waiter waits while the owner loads')
  t.equal(await b.redis.get(`${key}:lock`) !== null, true)
  await first.release()
  await eventually(woken, 'woken by the release, well before the lock\'s 60 s lifetime')
  t.equal(await a.redis.exists(`${key}:lock`), 0)
  const next = await other.claim(key)
  t.equal(next?.owner, true, 'the lock is free again')
  if (next?.owner === true) await next.release()
})

t.test('a waiter of the owner\'s own instance is woken by its release too (the bus drops an instance\'s own messages)', async (t) => {
  const channel = `${testPrefix(t)}events`
  const key = `${testPrefix(t)}v1:{w}:profile`
  const instance = await busInstance(t, channel)
  const lock = lockOf(instance, 60_000)
  for (const how of ['release', 'released by the store\'s script'] as const) {
    const first = await lock.claim(key)
    const second = await lock.claim(key)
    if (first?.owner !== true || second?.owner !== false) throw new Error('expected one owner and one waiter')
    const woken = watch(second.settled)
    if (how === 'release') {
      await first.release()
    } else {
      // What the store-and-release script does along with its write.
      await instance.redis.del(`${key}:lock`)
      first.lock?.released()
    }
    await settle()
    t.equal(woken(), true, `${how}: woken at once, not after the lock's 60 s lifetime`)
  }
})

t.test('a release by an owner whose lock expired does not free the new owner\'s lock', async (t) => {
  const channel = `${testPrefix(t)}events`
  const key = `${testPrefix(t)}v1:{x}:profile`
  const a = await busInstance(t, channel)
  const coalescer = lockOf(a, 100)
  const late = await coalescer.claim(key)
  if (late?.owner === true) await a.redis.pexpire(`${key}:lock`, 1)
  await eventually(async () => await a.redis.exists(`${key}:lock`) === 0, 'lock expired')
  await a.redis.set(`${key}:lock`, 'new-owner', 'PX', 60_000)
  if (late?.owner === true) await late.release()
  t.equal(await a.redis.get(`${key}:lock`), 'new-owner')
})

t.test('without the events channel, one instance still owns the job; a waiter looks again after the lock\'s lifetime', async (t) => {
  const channel = `${testPrefix(t)}events`
  const a = await busInstance(t, channel)
  const coalescer = lockOf(a, 200)
  await a.events.close()
  await a.redis.set(`${channel}-k:lock`, 'someone', 'PX', 60_000)
  const waiting = await coalescer.claim(`${channel}-k`)
  if (waiting?.owner !== false) throw new Error('expected a waiter: the lock is Redis\'s, not the bus\'s')
  await waiting.settled
  const next = await coalescer.claim('another-key')
  t.equal(next?.owner, true, 'a free key is owned at once')
  if (next?.owner === true) await next.release()
})

t.test('the in-process tier: hits cost no shared read; other instances\' fills and purges drop copies, or the copies\' 2 s bound without the channel', async (t) => {
  const channel = `${testPrefix(t)}events`
  const a = await busInstance(t, channel)
  const b = await busInstance(t, channel)
  const clock = new Clock()
  const held = new Map<string, CacheEntry>()
  let sharedReads = 0
  const driver: CacheDriver = {
    get: async (key) => { sharedReads++; return held.get(key) },
    set: async (key, entry) => { held.set(key, entry); return entry },
    purgeMark: async () => '',
    markStale: async () => 0
  }
  const { tier } = sharedTier({ driver, bus: a.events, now: clock.now })
  const v1 = createEntry(200, '"v1"', clock.now(), { freshMs: 300_000, staleMs: 0 })
  await tier.set('k', v1)
  for (let i = 0; i < 5; i++) t.same(await tier.get('k'), v1)
  t.equal(sharedReads, 0, 'served from this process')

  clock.advance(3_000)
  await tier.get('k')
  t.equal(sharedReads, 1, 'held a few seconds at most')

  const v2 = createEntry(200, '"v2"', clock.now(), { freshMs: 300_000, staleMs: 0 })
  held.set('k', v2)
  await b.events.publish({ type: 'filled', key: 'k', etag: v2.etag })
  await eventually(async () => (await tier.get('k'))?.body === '"v2"', 'copy dropped after another instance\'s fill')

  const reads = sharedReads
  await b.events.publish({ type: 'staled', key: 'k' })
  await eventually(async () => { await tier.get('k'); return sharedReads > reads }, 'copy dropped after another instance\'s purge')

  await a.events.close()
  const before = sharedReads
  t.equal((await tier.get('k'))?.body, '"v2"', 'without the channel, a copy serves what is left of its bound')
  t.equal(sharedReads, before)
  clock.advance(2_000)
  const v3 = createEntry(200, '"v3"', clock.now(), { freshMs: 300_000, staleMs: 0 })
  held.set('k', v3)
  t.equal((await tier.get('k'))?.body, '"v3"', 'past the bound Redis is read: a fill or purge elsewhere, unheard, is seen within 2 s')
  t.equal(sharedReads, before + 1, 'one shared read')
  const v4 = createEntry(200, '"v4"', clock.now(), { freshMs: 300_000, staleMs: 0 })
  await tier.set('k', v4)
  t.same(held.get('k'), v4, 'and a fill is written there: Redis is still the cache')
})

t.test('an owner keeps renewing its lock past a renewal that failed: a flap of Redis shorter than the lock\'s life does not lose it', async (t) => {
  // Node's mock timers, for this test only: the renewal's interval moves without waiting.
  mock.timers.enable({ apis: ['setInterval'] })
  t.teardown(() => { mock.timers.reset() })
  for (const ttlMs of [300, 1_000, 3_000]) {
    let up = true
    const renewals: string[] = []
    const health = {
      get up () { return up },
      run: async <T>(command: () => Promise<T>): Promise<T> => { if (!up) throw new Error('redis is down'); return await command() },
      listen: () => {}
    }
    const redis = { set: async () => 'OK', eval: async (script: string) => { if (script.includes('PEXPIRE')) renewals.push('renewed'); return 1 } }
    const lock = new OwnerLock({ redis: redis as never, health, bus: { listen: () => {}, publish: async () => {} }, ttlMs, onError: () => {} })
    const claim = await lock.claim(`job-${ttlMs}`)
    t.equal(claim?.owner, true)
    const third = async (): Promise<void> => {
      mock.timers.tick(ttlMs / 3)
      await settle()
    }
    await third()
    t.same(renewals, ['renewed'], `${ttlMs} ms lock: renewed a third into its life`)
    up = false
    await third()
    up = true
    for (let tick = 0; tick < 3; tick++) await third()
    t.same(renewals, ['renewed', 'renewed', 'renewed', 'renewed'], `${ttlMs} ms lock: every renewal after the one that failed`)
    if (claim?.owner === true) await claim.release()
    for (let tick = 0; tick < 3; tick++) await third()
    t.equal(renewals.length, 4, `${ttlMs} ms lock: none after its release`)
  }
})
