import t from 'tap'
import { profileOf } from '../../../dev/profiles.ts'
import { createEntry, type CacheEntry } from '../../../src/cache/cache-entry.ts'
import { CacheStack } from '../../../src/cache/cache-stack.ts'
import { DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES, MemoryDriver } from '../../../src/cache/memory-driver.ts'
import { noTelemetry } from '../../../src/telemetry/telemetry.ts'
import { Clock } from '../../helper.ts'

const PURGE_MEMORY_MS = 60_000

const freshness = { freshMs: 300_000, staleMs: 86_400_000 }

t.test('the in-process store stays within its bound after three times as many distinct usernames', async (t) => {
  const clock = new Clock()
  const store = new MemoryDriver({ now: clock.now, purgeMemoryMs: PURGE_MEMORY_MS })
  const profile = (username: string): CacheEntry => createEntry(200, JSON.stringify({ user: profileOf(username) }), clock.now(), freshness)
  // Three turnovers of the whole store: what held after the first holds after any number.
  const usernames = 3 * DEFAULT_MAX_ENTRIES
  for (let i = 0; i < usernames; i++) {
    await store.set(`member-${i}`, profile(`member-${i}`))
    if (i % 1_000 === 0) t.ok(store.size <= DEFAULT_MAX_ENTRIES, `${i}: within ${DEFAULT_MAX_ENTRIES} entries`)
  }
  t.equal(store.size, DEFAULT_MAX_ENTRIES)
  t.ok(store.bytes <= DEFAULT_MAX_BYTES)
  t.ok(store.held(`member-${usernames - 1}`), 'the most recent are kept')
  t.equal(store.held('member-0'), undefined, 'the least recently used went first')
})

t.test('the cache without Redis is bounded the same way: the least recently used is loaded again', async (t) => {
  const clock = new Clock()
  const cache = new CacheStack({
    memory: { maxEntries: 3 }, budget: { purgeMemoryMs: PURGE_MEMORY_MS, maxClaims: 1, callerMs: 5_000, callerWaitMs: 4_750, callerLoadMs: 4_700 }, now: clock.now, telemetry: noTelemetry, onError: (error) => { throw error }
  })
  let loads = 0
  const load = (username: string) => async (): Promise<CacheEntry> => {
    loads++
    return createEntry(200, JSON.stringify({ user: profileOf(username) }), clock.now(), freshness)
  }
  for (const username of ['a', 'b', 'c', 'd']) await cache.lookup(username, 'profile', load(username))
  t.equal(loads, 4)
  t.equal((await cache.lookup('d', 'profile', load('d'))).state, 'HIT', 'the most recent are kept')
  t.equal((await cache.lookup('a', 'profile', load('a'))).state, 'MISS', 'the least recently used went first')
  t.equal(loads, 5)
})

t.test('the in-process store also stays within its byte bound', async (t) => {
  const clock = new Clock()
  const store = new MemoryDriver({ now: clock.now, maxBytes: 1_000_000, purgeMemoryMs: PURGE_MEMORY_MS })
  const body = 'x'.repeat(100_000)
  for (let i = 0; i < 50; i++) await store.set(`k${i}`, createEntry(200, body, clock.now(), freshness))
  t.ok(store.bytes <= 1_000_000)
  t.equal(store.size, 9, 'nine bodies of 100 kB and their overhead fit in 1 MB')
  await store.set('huge', createEntry(200, 'x'.repeat(2_000_000), clock.now(), freshness))
  t.equal(await store.get('huge'), undefined, 'a body larger than the whole bound is not kept')
  t.equal(store.size, 9, 'and evicts nothing')
})

t.test('an entry past its stale window is gone; a newer fill is never replaced by an older one', async (t) => {
  const clock = new Clock()
  const store = new MemoryDriver({ now: clock.now, purgeMemoryMs: PURGE_MEMORY_MS })
  const older = createEntry(200, '"old"', clock.now(), freshness)
  clock.advance(1_000)
  const newer = createEntry(200, '"new"', clock.now(), freshness)
  t.same(await store.set('k', newer), newer)
  t.equal(await store.set('k', older), undefined)
  t.equal((await store.get('k'))?.body, '"new"')
  clock.advance((300 + 86_400) * 1000)
  t.equal(await store.get('k'), undefined)
  t.equal(store.size, 0)
})

t.test('markStale makes held entries stale as of now, keeping them servable', async (t) => {
  const clock = new Clock()
  const store = new MemoryDriver({ now: clock.now, purgeMemoryMs: PURGE_MEMORY_MS })
  const entry = createEntry(200, '"body"', clock.now(), freshness)
  await store.set('k', entry)
  clock.advance(5_000)
  t.equal(await store.markStale(['k', 'absent'], clock.now()), 1)
  t.same(await store.get('k'), { ...entry, freshUntil: clock.now() })
})

t.test('a load that read the purge mark before a purge is stored stale, one that read it after fresh, whatever the times', async (t) => {
  const clock = new Clock()
  const store = new MemoryDriver({ now: clock.now, purgeMemoryMs: PURGE_MEMORY_MS })
  const before = await store.purgeMark('k')
  await store.markStale(['k'], clock.now())
  const after = await store.purgeMark('k')
  const loaded = createEntry(200, '"before the purge"', clock.now(), freshness)
  const stale = { ...loaded, freshUntil: loaded.storedAt }
  t.same(await store.set('k', loaded, before), stale)
  t.same(await store.get('k'), stale, 'served stale, so the next read revalidates')
  const again = createEntry(200, '"after the purge"', clock.now(), freshness)
  t.same(await store.set('k', again, after), again, 'the revalidation is stored fresh, in the same millisecond')
  const handedOver = createEntry(200, '"no mark"', clock.now(), freshness)
  t.same(await store.set('k', handedOver), { ...handedOver, freshUntil: handedOver.storedAt }, 'without a mark, a remembered purge counts')
  clock.advance(60_001)
  const later = createEntry(200, '"purge forgotten"', clock.now(), freshness)
  t.same(await store.set('k', later), later, 'until it is forgotten')
})
