import t from 'tap'
import { createEntry, FRESHNESS_JITTER, type CacheEntry } from '../../../src/cache/cache-entry.ts'
import { MemoryDriver } from '../../../src/cache/memory-driver.ts'
import type { CacheDriver } from '../../../src/cache/driver.ts'
import { CacheStack, type CacheFailure, type Load, type Served } from '../../../src/cache/cache-stack.ts'
import type { CacheState, Resource } from '../../../src/resources.ts'
import { loadBudget } from '../../../src/load-budget.ts'
import { Clock, quietBus, settle, unitConfig } from '../../helper.ts'

const freshness = { freshMs: 300_000, staleMs: 86_400_000 }
const budget = loadBudget(unitConfig())

/** A Redis stand-in: `driver`, always up, with a bus and no other instance to coordinate with. */
function sharedOver (driver: CacheDriver) {
  return { driver, redis: { up: true, listen: () => {} }, bus: quietBus(), claim: async () => undefined }
}

/** The in-process cache, or, given a driver, the cache over that driver as it runs over Redis. */
function setup (driver?: CacheDriver) {
  const clock = new Clock()
  const results: Array<[Resource, CacheState]> = []
  const waiters: Resource[] = []
  const errors: CacheFailure[] = []
  const cache = new CacheStack({
    ...(driver !== undefined && { shared: sharedOver(driver) }),
    budget,
    now: clock.now,
    freshMs: () => freshness.freshMs,
    telemetry: { cacheResult: (resource, state) => results.push([resource, state]), coalescedWaiter: (resource) => waiters.push(resource) },
    onError: (_error, _key, failure) => errors.push(failure)
  })
  const get = async (key: string, resource: Resource, load: Load, signal?: AbortSignal): Promise<Served> =>
    await cache.lookup(key, resource, load, signal)
  let calls = 0
  let body = '"v1"'
  let failing = false
  let release: () => void = () => {}
  let gate = Promise.resolve()
  const load = async (): Promise<CacheEntry> => {
    calls++
    await gate
    if (failing) throw new Error('upstream down')
    return createEntry(200, body, clock.now(), freshness)
  }
  return {
    clock,
    cache,
    get,
    results,
    waiters,
    errors,
    load,
    calls: () => calls,
    setBody: (value: string) => { body = value },
    fail: (value: boolean) => { failing = value },
    hold: () => { gate = new Promise((resolve) => { release = resolve }) },
    release: () => release()
  }
}

t.test('concurrent misses share one load, and the waiters are reported', async (t) => {
  const s = setup()
  s.hold()
  const pending = Array.from({ length: 20 }, async () => await s.get('k', 'timeline', s.load))
  await settle()
  s.release()
  const served = await Promise.all(pending)
  t.equal(s.calls(), 1)
  t.same(new Set(served.map(({ state }) => state)), new Set(['MISS']))
  t.equal(s.waiters.length, 19)
  t.same(new Set(s.waiters), new Set(['timeline']))
  t.same(s.results.length, 20)
})

t.test('a stale entry is served at once and revalidated once, in the background', async (t) => {
  const s = setup()
  await s.get('k', 'profile', s.load)
  s.clock.advance(301_000)
  s.setBody('"v2"')
  s.hold()
  const stale = await Promise.all(Array.from({ length: 10 }, async () => await s.get('k', 'profile', s.load)))
  t.same(stale.map(({ state, entry }) => `${state} ${entry.body}`), Array(10).fill('STALE "v1"'))
  t.equal(s.waiters.length, 0, 'stale readers wait for nothing')
  s.release()
  await settle()
  t.equal(s.calls(), 2)
  const fresh = await s.get('k', 'profile', s.load)
  t.equal(`${fresh.state} ${fresh.entry.body}`, 'HIT "v2"')
  t.equal(fresh.at, s.clock.now())
})

t.test('a failed revalidation keeps the stale entry as it was and is reported', async (t) => {
  const s = setup()
  const { entry } = await s.get('k', 'profile', s.load)
  s.clock.advance(301_000)
  s.fail(true)
  t.equal((await s.get('k', 'profile', s.load)).state, 'STALE')
  await settle()
  t.same(s.errors, ['revalidate'])
  const again = await s.get('k', 'profile', s.load)
  t.equal(again.state, 'STALE')
  t.same(again.entry, entry, 'not overwritten, not shortened')
})

t.test('a failed load with nothing cached is the caller\'s error, for every waiter', async (t) => {
  const s = setup()
  s.fail(true)
  const answers = await Promise.allSettled([s.get('k', 'profile', s.load), s.get('k', 'profile', s.load)])
  t.same(answers.map(({ status }) => status), ['rejected', 'rejected'])
  t.equal(s.calls(), 1)
})

t.test('a store that cannot be read answers BYPASS, still one load per key; a failed write costs the caller nothing', async (t) => {
  const down: CacheDriver = {
    get: async () => { throw new Error('redis is reconnecting') },
    purgeMark: async () => { throw new Error('redis is reconnecting') },
    set: async () => { throw new Error('redis is reconnecting') },
    markStale: async () => { throw new Error('redis is reconnecting') }
  }
  const s = setup(down)
  s.hold()
  const pending = Array.from({ length: 5 }, async () => await s.get('k', 'profile', s.load))
  await settle()
  s.release()
  const served = await Promise.all(pending)
  t.same(served.map(({ state, entry }) => `${state} ${entry.body}`), Array(5).fill('BYPASS "v1"'))
  t.equal(s.calls(), 1)
  t.same(s.results.map(([, state]) => state), Array(5).fill('BYPASS'))
  t.ok(s.errors.every((failure) => failure === 'store'))
  await t.rejects(s.cache.markStale(['k']), /reconnecting/, 'a purge that could not happen says so')
})

t.test('a caller gone before its miss starts no load and joins none; one that leaves a shared load leaves it to the others', async (t) => {
  const s = setup()
  const gone = new AbortController()
  gone.abort(new Error('the caller went away'))
  await t.rejects(s.get('k', 'profile', s.load, gone.signal), { message: 'the caller went away' })
  t.equal(s.calls(), 0, 'no load for a caller already gone')

  s.hold()
  const leaving = new AbortController()
  const first = s.get('k', 'profile', s.load, leaving.signal)
  const staying = s.get('k', 'profile', s.load, new AbortController().signal)
  await settle()
  leaving.abort(new Error('left'))
  await t.rejects(first, { message: 'left' })
  s.release()
  t.equal((await staying).state, 'MISS', 'the caller that stayed gets the load')
  t.equal(s.calls(), 1)
})

t.test('freshness is shortened by at most the jitter, never lengthened', async (t) => {
  for (const random of [0, 0.5, 0.999]) {
    const entry = createEntry(200, '""', 1_000, freshness, () => random)
    t.ok(entry.freshUntil <= 1_000 + freshness.freshMs)
    t.ok(entry.freshUntil >= 1_000 + freshness.freshMs * (1 - FRESHNESS_JITTER))
    t.equal(entry.staleUntil - entry.freshUntil, freshness.staleMs)
  }
  t.not(createEntry(200, '""', 0, freshness, () => 0).freshUntil, createEntry(200, '""', 0, freshness, () => 0.9).freshUntil)
})

t.test('lookup answers a fresh entry held here at once, without a promise; anything else is a promise', async (t) => {
  const s = setup()
  t.ok(s.cache.lookup('k', 'profile', s.load) instanceof Promise, 'nothing held: a load')
  await settle()
  const held = s.cache.lookup('k', 'profile', s.load)
  if (held instanceof Promise) throw new Error('expected the held entry at once')
  t.equal(held.state, 'HIT')
  t.equal(held.entry.body, '"v1"')
  t.equal(held.at, s.clock.now())
  t.same(s.results, [['profile', 'MISS'], ['profile', 'HIT']], 'a held hit is reported like any other')
  s.clock.advance(freshness.freshMs)
  const stale = s.cache.lookup('k', 'profile', s.load)
  t.ok(stale instanceof Promise, 'stale: served through the store, and revalidated')
  t.equal((await stale).state, 'STALE')
})

t.test('over a shared store, a copy held here answers at once for a few seconds, then the store is read again', async (t) => {
  const memory = new MemoryDriver({ now: Date.now, purgeMemoryMs: budget.purgeMemoryMs })
  let reads = 0
  const s = setup(readingThrough(memory, async (key) => { reads++; return await memory.get(key) }))
  await s.get('k', 'profile', s.load)
  const afterFill = reads
  const copy = s.cache.lookup('k', 'profile', s.load)
  t.notOk(copy instanceof Promise, 'the fill is held here')
  s.clock.advance(3_000)
  t.equal((await s.cache.lookup('k', 'profile', s.load)).state, 'HIT', 'a fresh entry, read from the store')
  t.equal(reads, afterFill + 1, 'once the copy has expired')
})

/** A store that is `memory` but for its reads, which `get` makes. */
function readingThrough (memory: MemoryDriver, get: CacheDriver['get']): CacheDriver {
  return {
    get,
    purgeMark: async (key) => await memory.purgeMark(key),
    set: async (key, entry, mark) => await memory.set(key, entry, mark),
    markStale: async (keys, now) => await memory.markStale(keys, now)
  }
}

t.test('a caller arriving while a load is under way joins it without asking the store', async (t) => {
  const memory = new MemoryDriver({ now: Date.now, purgeMemoryMs: budget.purgeMemoryMs })
  let reads = 0
  const s = setup(readingThrough(memory, async (key) => { reads++; return await memory.get(key) }))
  s.hold()
  const first = s.get('k', 'profile', s.load)
  await settle()
  const afterFirst = reads
  const later = s.get('k', 'profile', s.load)
  await settle()
  t.equal(reads, afterFirst, 'the later caller read nothing')
  s.release()
  t.same((await Promise.all([first, later])).map(({ state, entry }) => [state, entry.body]), [['MISS', '"v1"'], ['MISS', '"v1"']])
  t.equal(s.calls(), 1)
  t.same(s.waiters, ['profile'], 'reported as a coalesced waiter')
})

t.test('a caller arriving while a load the store could not be read for is under way asks the store again', async (t) => {
  const memory = new MemoryDriver({ now: Date.now, purgeMemoryMs: budget.purgeMemoryMs })
  let failing = true
  const s = setup(readingThrough(memory, async (key) => { if (failing) throw new Error('Redis timed out'); return await memory.get(key) }))
  s.hold()
  const first = s.get('k', 'profile', s.load)
  await settle()
  failing = false
  await memory.set('k', createEntry(200, '"from another instance"', Date.now(), freshness))
  const later = await s.get('k', 'profile', s.load)
  t.same([later.state, later.entry.body], ['HIT', '"from another instance"'], 'served from the store at once, not after the load')
  s.release()
  t.equal((await first).state, 'BYPASS')
})

t.test('a hot entry is refreshed ahead of time, at the refresh-ahead class, so it is never served stale', async (t) => {
  const s = setup()
  const priorities: string[] = []
  let body = '"v1"'
  // No freshness jitter: the last tenth of freshness is exactly the last 30 s.
  const load: Load = async (_signal, priority) => {
    priorities.push(priority)
    return createEntry(200, body, s.clock.now(), freshness, () => 0)
  }
  await s.get('k', 'profile', load)
  s.clock.advance(freshness.freshMs / 2 - 1_000)
  for (let i = 0; i < 5; i++) t.equal((await s.get('k', 'profile', load)).state, 'HIT', 'hits in the first half of its freshness...')
  s.clock.advance(freshness.freshMs * 0.4 - 9_000)
  for (let i = 0; i < 4; i++) t.equal((await s.get('k', 'profile', load)).state, 'HIT', '...and four in the second half, before the last tenth')
  t.same(priorities, ['caller'], 'nothing refreshed outside the last tenth of its freshness')
  s.clock.advance(20_000)
  body = '"v2"'
  t.equal((await s.get('k', 'profile', load)).state, 'HIT', 'the first hit in the last tenth, the fifth from half of it, is still a hit...')
  await settle()
  t.same(priorities, ['caller', 'refresh-ahead'], '...and refreshes it, at the refresh-ahead class')
  const after = await s.get('k', 'profile', load)
  t.same([after.state, after.entry.body], ['HIT', '"v2"'], 'the refreshed entry, fresh for a whole freshness again')
  s.clock.advance(freshness.freshMs - 30_000)
  t.equal((await s.get('k', 'profile', load)).state, 'HIT', 'when the first version would have been stale')
})
