import t from 'tap'
import { createEntry, isFresh } from '../../src/cache/cache-entry.ts'
import { HandBack } from '../../src/cache/hand-back.ts'
import { purgeMarkKey } from '../../src/cache/keys.ts'
import { MemoryDriver } from '../../src/cache/memory-driver.ts'
import { NearCopies } from '../../src/cache/near-copies.ts'
import { RedisDriver } from '../../src/cache/redis-driver.ts'
import { RedisClock } from '../../src/redis/clock.ts'
import { Clock, eventually, fakeHealth, quietBus, sharedTier, testRedis } from '../helper.ts'

/** Redis's own expiry of a purge mark runs on real time: a short memory, waited out, stands for one long past. */
const PURGE_MEMORY_MS = 100
const LIFE = { freshMs: 300_000, staleMs: 86_400_000 }

/** A health state the test switches, telling the tier as RedisHealth does. */
function switchableHealth (): ReturnType<typeof fakeHealth> & { listen: (listener: (up: boolean) => void) => void, turn: (up: boolean) => void } {
  const listeners: Array<(up: boolean) => void> = []
  const health = fakeHealth()
  return Object.assign(health, {
    listen: (listener: (up: boolean) => void) => { listeners.push(listener) },
    turn: (up: boolean) => { health.up = up; for (const listener of listeners) listener(up) }
  })
}

for (const heldAlone of ['a copy kept when Redis went away', 'a fill made alone'] as const) {
  t.test(`${heldAlone}, handed back after a purge elsewhere that Redis no longer remembers, does not undo it`, async (t) => {
    const { redis, prefix } = testRedis(t)
    const clock = new Clock()
    const key = `${prefix}v1:{alice}:profile`
    const instance = (health: ReturnType<typeof switchableHealth>): ReturnType<typeof sharedTier> => sharedTier({
      driver: new RedisDriver({ redis, health, clock: new RedisClock(clock.now), purgeMemoryMs: PURGE_MEMORY_MS }),
      redis: health,
      now: clock.now
    })
    const bHealth = switchableHealth()
    const a = instance(switchableHealth())
    const b = instance(bHealth)
    const v1 = createEntry(200, '"v1"', clock.now(), LIFE)
    await a.tier.set(key, v1)
    t.same(await b.tier.get(key), v1, 'B copies what A stored')

    bHealth.turn(false)
    clock.advance(1_000)
    if (heldAlone === 'a fill made alone') await b.tier.set(key, createEntry(200, '"v2"', clock.now(), LIFE))
    t.equal(b.alone.size, 1, 'B holds it alone')
    clock.advance(1_000)
    await a.tier.markStale([key], clock.now())
    await eventually(async () => await redis.exists(purgeMarkKey(key)) === 0, 'the purge forgotten by Redis')
    clock.advance(PURGE_MEMORY_MS)

    bHealth.turn(true)
    await eventually(() => b.alone.size === 0, 'handed back')
    for (const [name, tier] of [['B', b.tier], ['A', a.tier]] as const) {
      const after = await tier.get(key)
      t.ok(after !== undefined && !isFresh(after, clock.now()), `${name} reads it stale: served STALE and revalidated, never a HIT`)
    }
  })
}

t.test('the very version Redis holds, handed back after this instance measured Redis\'s clock anew, stays known here: a flap of Redis costs no load', async (t) => {
  const { redis, prefix } = testRedis(t)
  const clock = new Clock()
  const key = `${prefix}v1:{alice}:profile`
  /** Measures Redis's clock as `behindMs` behind this host's (one TIME, as when Redis comes up). */
  const measure = (redisClock: RedisClock, behindMs: number): RedisClock => {
    const redisNow = clock.now() - behindMs
    redisClock.sync([String(Math.floor(redisNow / 1000)), String((redisNow % 1000) * 1000)], clock.now(), clock.now())
    return redisClock
  }
  const bClock = measure(new RedisClock(clock.now), 0)
  const instance = (health: ReturnType<typeof switchableHealth>, redisClock: RedisClock): ReturnType<typeof sharedTier> => sharedTier({
    driver: new RedisDriver({ redis, health, clock: redisClock, purgeMemoryMs: PURGE_MEMORY_MS }),
    redis: health,
    // Its subscription kept: events reach it again as soon as Redis is back (RedisBus hears the health first).
    bus: quietBus({ listenReady: (ready) => { health.listen((up) => { if (up) ready() }) } }),
    now: clock.now
  })
  const a = instance(switchableHealth(), measure(new RedisClock(clock.now), 0))
  const bHealth = switchableHealth()
  const b = instance(bHealth, bClock)
  const v1 = createEntry(200, '"v1"', clock.now(), LIFE)
  await a.tier.set(key, v1)
  const stamped = await redis.hget(key, 't')
  t.equal((await b.tier.get(key))?.etag, v1.etag, 'B copies what A stored')
  clock.advance(5_000)

  bHealth.turn(false)
  t.equal(b.alone.size, 1, 'B keeps what it knew while Redis is away')
  // Back, B measures Redis's clock anew, 5 ms off its first measure: the entry it hands back is stamped 5 ms earlier.
  measure(bClock, 5)
  bHealth.turn(true)
  await eventually(() => b.alone.size === 0, 'handed back')
  t.equal(await redis.hget(key, 't'), stamped, 'Redis\'s entry as A stored it: not written again')
  bHealth.turn(false)
  t.equal(b.tier.held(key)?.etag, v1.etag, 'Redis away again: B still knows it, rather than loading it (a Cluster failover flaps Redis\'s health)')
})

t.test('what was held alone and is past its stale window by the time Redis is back is dropped, not handed over; the hand-back ends', async (t) => {
  const clock = new Clock()
  const alone = new MemoryDriver({ purgeMemoryMs: PURGE_MEMORY_MS, now: clock.now })
  // The store's count includes what has expired until it is purged: more snapshots than that would be a loop.
  let snapshots = 0
  const entries = alone.entries.bind(alone)
  alone.entries = () => {
    if (++snapshots > 10) throw new Error('the hand-back keeps taking empty snapshots')
    return entries()
  }
  const written: string[] = []
  const errors: unknown[] = []
  const handBack = new HandBack({
    driver: { set: async (key, entry) => { written.push(key); return entry } },
    alone,
    copies: new NearCopies({ now: clock.now }),
    up: () => true,
    announce: () => {},
    onError: (error) => { errors.push(error) }
  })
  // A 404 asked for early in an outage, and a profile: their stale windows end at different times.
  await alone.set('ghost', createEntry(404, '', clock.now(), { freshMs: 60_000, staleMs: 60_000 }))
  await alone.set('alice', createEntry(200, '"a"', clock.now(), LIFE))
  clock.advance(121_000)
  handBack.start()
  await eventually(() => alone.size === 0, 'nothing held alone any more')
  t.same(written, ['alice'], 'the servable entry handed over, the expired one not')
  t.same(errors, [])
  t.ok(snapshots <= 3, `${snapshots} snapshots of what was held`)
  handBack.start()
  t.equal(alone.size, 0, 'started again, nothing to do')
})
