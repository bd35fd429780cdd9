import t from 'tap'
import { profileOf } from '../../../dev/profiles.ts'
import { createEntry, isFresh, type CacheEntry } from '../../../src/cache/cache-entry.ts'
import { CacheStack } from '../../../src/cache/cache-stack.ts'
import { ENTRY_OVERHEAD_BYTES, entryBytes } from '../../../src/cache/entry-bytes.ts'
import { FreshEvictions, WARN_EVERY_MS } from '../../../src/cache/fresh-evictions.ts'
import { MemoryDriver } from '../../../src/cache/memory-driver.ts'
import { cacheKey } from '../../../src/cache/keys.ts'
import { MIN_CACHE_MEMORY_MB } from '../../../src/config.ts'
import { MAX_UPSTREAM_BODY_BYTES } from '../../../src/resources.ts'
import { encodedBytes } from '../../../src/http/encoded-bodies.ts'
import type { StoreHeld } from '../../../src/telemetry/telemetry.ts'
import { noTelemetry } from '../../../src/telemetry/telemetry.ts'
import { Clock } from '../../helper.ts'

const PURGE_MEMORY_MS = 60_000

const freshness = { freshMs: 300_000, staleMs: 86_400_000 }

t.test('the in-process store stays within its byte bound after three times as many distinct usernames', async (t) => {
  const clock = new Clock()
  const maxBytes = 1_000_000
  const store = new MemoryDriver({ now: clock.now, maxBytes, purgeMemoryMs: PURGE_MEMORY_MS })
  const profile = (username: string): CacheEntry => createEntry(200, JSON.stringify({ user: profileOf(username) }), clock.now(), freshness)
  await store.set('member-0', profile('member-0'))
  // Three turnovers of the whole store: what held after the first holds after any number.
  const usernames = 3 * Math.ceil(maxBytes / store.bytes)
  for (let i = 1; i < usernames; i++) {
    await store.set(`member-${i}`, profile(`member-${i}`))
    if (i % 500 === 0) t.ok(store.bytes <= maxBytes, `${i}: ${store.bytes} bytes`)
  }
  t.ok(store.bytes > maxBytes - 2_000, 'filled to the bound, less than an entry short of it')
  t.ok(store.held(`member-${usernames - 1}`), 'the most recent are kept')
  t.equal(store.held('member-0'), undefined, 'the least recently used went first')
})

t.test('the cache without Redis is bounded the same way: the least recently used is loaded again', async (t) => {
  const clock = new Clock()
  const body = (username: string): string => JSON.stringify({ user: profileOf(username) })
  const cache = new CacheStack({
    // Room for three of these entries, not four.
    memory: { maxBytes: 3.5 * entryBytes('a', createEntry(200, body('a'), 0, freshness), () => 0) },
    budget: { purgeMemoryMs: PURGE_MEMORY_MS, maxClaims: 1, callerMs: 5_000, callerWaitMs: 4_750, callerLoadMs: 4_700 },
    now: clock.now,
    freshMs: () => freshness.freshMs,
    telemetry: noTelemetry,
    onError: (error) => { throw error }
  })
  let loads = 0
  const load = (username: string) => async (): Promise<CacheEntry> => {
    loads++
    return createEntry(200, body(username), clock.now(), freshness)
  }
  for (const username of ['a', 'b', 'c', 'd']) await cache.lookup(username, 'profile', load(username))
  t.equal(loads, 4)
  t.equal((await cache.lookup('d', 'profile', load('d'))).state, 'HIT', 'the most recent are kept')
  t.equal((await cache.lookup('a', 'profile', load('a'))).state, 'MISS', 'the least recently used went first')
  t.equal(loads, 5)
})

t.test('past its byte bound the store evicts least recently used first, shows what it holds, and counts and tells fresh evictions', async (t) => {
  const clock = new Clock()
  const fresh = { freshMs: 600_000, staleMs: 3_600_000 }
  const body = 'x'.repeat(10_000)
  const size = entryBytes('k0', createEntry(200, body, 0, fresh), () => 0)
  let read: (() => StoreHeld) | undefined
  let counted = 0
  const warnings: number[] = []
  const evictions = new FreshEvictions({ now: clock.now, warn: (evicted) => { warnings.push(evicted) } })
  const store = new MemoryDriver({
    now: clock.now,
    maxBytes: 3 * size,
    purgeMemoryMs: PURGE_MEMORY_MS,
    telemetry: { memoryStore: (held) => { read = held }, freshEviction: () => { counted++; evictions.evicted() } }
  })
  for (const key of ['k0', 'k1', 'k2']) await store.set(key, createEntry(200, body, clock.now(), fresh))
  t.same(read?.(), { entries: 3, bytes: 3 * size, maxBytes: 3 * size }, 'the gauges read the entries and bytes held, and the bound')
  store.held('k0')
  await store.set('k3', createEntry(200, body, clock.now(), fresh))
  t.same([...store.entries()].map(([key]) => key).sort(), ['k0', 'k2', 'k3'], 'k1, the least recently used, went first')
  t.equal(counted, 1, 'a fresh entry pushed out is counted')
  t.same(warnings, [1], 'and said in one line')

  await store.set('k4', createEntry(200, body, clock.now(), fresh))
  clock.advance(WARN_EVERY_MS - 1)
  await store.set('k5', createEntry(200, body, clock.now(), fresh))
  t.equal(counted, 3)
  t.same(warnings, [1], 'no second line within the minute')
  clock.advance(1)
  await store.set('k6', createEntry(200, body, clock.now(), fresh))
  t.same(warnings, [1, 3], 'a minute on, one line says how many since the last')

  clock.advance(fresh.freshMs)
  for (const key of ['k7', 'k8', 'k9']) await store.set(key, createEntry(200, body, clock.now(), fresh))
  t.equal(counted, 4, 'stale entries pushed out are not counted (the store was not too small for them to be served fresh)')
  t.same(read?.(), { entries: 3, bytes: 3 * size, maxBytes: 3 * size })
})

t.test('an entry counts its key, its body as V8 keeps it, its tag, its encodings and the fixed overhead', async (t) => {
  const entry = (body: string): CacheEntry => createEntry(200, body, 0, freshness)
  const latin = entry('{"name":"Björn"}')
  const wide = entry('{"name":"Łucja 🐈"}')
  t.equal(entryBytes('key', latin, () => 0), 3 + latin.body.length + latin.etag.length + ENTRY_OVERHEAD_BYTES, 'Latin-1: a byte a character')
  t.equal(entryBytes('key', wide, () => 0), 3 + 2 * wide.body.length + wide.etag.length + ENTRY_OVERHEAD_BYTES, 'otherwise two')
  t.equal(entryBytes('key', latin, (body) => body.length * 10) - entryBytes('key', latin, () => 0), latin.body.length * 10, 'the encodings as given')
  const large = JSON.stringify({ posts: Array.from({ length: 20 }, (_, n) => `post ${n} `.repeat(20)) })
  t.equal(encodedBytes(large), Buffer.byteLength(large), 'a body worth encoding counts its encodings at its own size')
  t.equal(encodedBytes(latin.body), 0, 'a small one none')
})

t.test('the in-process store also stays within its byte bound', async (t) => {
  const clock = new Clock()
  let evicted = 0
  const telemetry = { memoryStore: () => {}, freshEviction: () => { evicted++ } }
  const store = new MemoryDriver({ now: clock.now, maxBytes: 1_000_000, purgeMemoryMs: PURGE_MEMORY_MS, telemetry })
  const body = 'x'.repeat(100_000)
  for (let i = 0; i < 50; i++) await store.set(`k${i}`, createEntry(200, body, clock.now(), freshness))
  t.ok(store.bytes <= 1_000_000)
  t.equal(store.size, 9, 'nine bodies of 100 kB and their overhead fit in 1 MB')
  evicted = 0
  t.equal(await store.set('huge', createEntry(200, 'x'.repeat(2_000_000), clock.now(), freshness)), undefined, 'a body larger than the whole bound is not stored')
  t.equal(await store.get('huge'), undefined, 'nor kept')
  t.equal(store.size, 9, 'and evicts nothing')
  t.equal(evicted, 1, 'but is counted (and told) as a fresh entry pushed out')
})

t.test('the least CACHE_MEMORY_MB holds the largest entry: the largest body, all of it above U+00FF, its encodings, the longest key', async (t) => {
  const body = JSON.stringify({ posts: ['\ufffd'.repeat(MAX_UPSTREAM_BODY_BYTES - '{"posts":[""]}'.length)] })
  const key = cacheKey('pbff:', 'timeline', '\u{1f408}'.repeat(128))
  const largest = entryBytes(key, createEntry(200, body, 0, freshness), encodedBytes)
  t.ok(largest <= MIN_CACHE_MEMORY_MB * 1024 * 1024, `${largest} bytes`)
  t.ok(largest > (MIN_CACHE_MEMORY_MB - 2) * 1024 * 1024, 'and not much less would')
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

t.test('markStale makes held entries fresh until they were stored (stale on any clock), keeping them servable', async (t) => {
  const clock = new Clock()
  const store = new MemoryDriver({ now: clock.now, purgeMemoryMs: PURGE_MEMORY_MS })
  const entry = createEntry(200, '"body"', clock.now(), freshness)
  await store.set('k', entry)
  clock.advance(5_000)
  t.equal(await store.markStale(['k', 'absent'], clock.now()), 1)
  t.same(await store.get('k'), { ...entry, freshUntil: entry.storedAt })
  t.notOk(isFresh({ ...entry, freshUntil: entry.storedAt }, entry.storedAt - 60_000), 'stale even on a clock a minute behind')
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
