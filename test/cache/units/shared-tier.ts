import t from 'tap'
import { createEntry, type CacheEntry } from '../../../src/cache/cache-entry.ts'
import type { CacheDriver } from '../../../src/cache/driver.ts'
import { MemoryDriver } from '../../../src/cache/memory-driver.ts'
import { NearCopies } from '../../../src/cache/near-copies.ts'
import { SharedTier } from '../../../src/cache/shared-tier.ts'
import type { BusEvent } from '../../../src/redis/bus.ts'
import { eventually } from '../../helper.ts'

/** A shared store whose reads the test answers one by one, and an events channel the test speaks on. */
function tierOverHeldReads () {
  const held = new Map<string, CacheEntry>()
  const pending: Array<() => void> = []
  /** While set, writes wait for it. */
  const gate: { write?: Promise<void> } = {}
  const driver: CacheDriver = {
    get: async (key) => await new Promise((resolve) => { pending.push(() => resolve(held.get(key))) }),
    set: async (key, entry) => { await gate.write; held.set(key, entry); return entry },
    purgeMark: async () => '',
    markStale: async () => 0
  }
  let onEvent: (event: BusEvent) => void = () => {}
  const bus = { ready: true, listen: (listener: { onEvent: (event: BusEvent) => void }) => { onEvent = listener.onEvent }, publish: async () => {} }
  const tier = new SharedTier({
    driver,
    bus,
    copies: new NearCopies({ ttlMs: 2_000, maxEntries: 10, maxBytes: 1_000_000, now: Date.now }),
    alone: new MemoryDriver({ maxEntries: 10, maxBytes: 1_000_000, purgeMemoryMs: 60_000, now: Date.now }),
    onError: () => {}
  })
  const answerReads = (): number => pending.splice(0).map((answer) => answer()).length
  const entry = (body: string): CacheEntry => createEntry(200, body, Date.now(), { freshMs: 300_000, staleMs: 0 })
  return { tier, held, answerReads, entry, gate, hear: (event: BusEvent) => onEvent(event) }
}

t.test('requests for a key this process does not hold share one shared read', async (t) => {
  const { tier, held, answerReads, entry } = tierOverHeldReads()
  const v1 = entry('"v1"')
  held.set('k', v1)
  const answers = Array.from({ length: 50 }, async () => await tier.get('k'))
  t.equal(answerReads(), 1, 'one read for fifty requests')
  t.same(await Promise.all(answers), Array(50).fill(v1))
  t.same(await tier.get('k'), v1)
  t.equal(answerReads(), 0, 'then held here')
  const missing = [tier.get('nobody'), tier.get('nobody')]
  t.equal(answerReads(), 1)
  t.same(await Promise.all(missing), [undefined, undefined])
})

t.test('a request after another instance\'s fill or purge, or a write here, does not join an older read', async (t) => {
  for (const change of ['filled', 'staled', 'written', 'written meanwhile another fill'] as const) {
    const { tier, held, answerReads, entry, gate, hear } = tierOverHeldReads()
    held.set('k', entry('"v1"'))
    const before = tier.get('k')
    const v2 = entry('"v2"')
    if (change === 'written') {
      await tier.set('k', v2)
    } else if (change === 'written meanwhile another fill') {
      let open = (): void => {}
      gate.write = new Promise((resolve) => { open = resolve })
      const writing = tier.set('k', v2)
      hear({ type: 'filled', key: 'other', etag: '"x"' })
      open()
      await writing
    } else {
      held.set('k', v2)
      hear(change === 'filled' ? { type: 'filled', key: 'k', etag: v2.etag } : { type: 'staled', key: 'k' })
    }
    const after = tier.get('k')
    t.equal(answerReads(), change === 'written' ? 1 : 2, `${change}: ${change === 'written' ? 'served from the write' : 'a read of its own'}`)
    await before
    t.equal((await after)?.body, '"v2"', change)
  }
})

t.test('a read or write under way when this instance purges the key does not leave a copy of what it answers', async (t) => {
  for (const overlap of ['read', 'write'] as const) {
    const { tier, held, answerReads, entry, gate } = tierOverHeldReads()
    const v1 = entry('"v1"')
    let open = (): void => {}
    let underWay: Promise<unknown>
    if (overlap === 'read') {
      held.set('k', v1)
      underWay = tier.get('k')
    } else {
      gate.write = new Promise((resolve) => { open = resolve })
      underWay = tier.set('k', v1)
    }
    await tier.markStale(['k'], Date.now())
    open()
    answerReads()
    t.equal((await underWay as CacheEntry | undefined)?.etag, v1.etag, `${overlap}: answers what it found`)
    const after = tier.get('k')
    t.equal(answerReads(), 1, `${overlap}: the next request reads the shared store, not a copy from before the purge`)
    await after
  }
})

t.test('held answers the copy held here, never a read: the hit path\'s question', async (t) => {
  const { tier, held, answerReads, entry, hear } = tierOverHeldReads()
  const v1 = entry('"v1"')
  held.set('k', v1)
  t.equal(tier.held('k'), undefined, 'not held here yet')
  t.equal(answerReads(), 0, 'and nothing was read')
  const read = tier.get('k')
  answerReads()
  await read
  t.same(tier.held('k'), v1, 'the copy, once read')
  hear({ type: 'staled', key: 'k' })
  t.equal(tier.held('k'), undefined, 'gone when another instance purges it')
})

/** A tier over a driver the test controls: writes of some keys fail, all may wait; reads answer at once; and its bus. */
function tierOverFlakyWrites () {
  const held = new Map<string, CacheEntry>()
  const writes = { failing: new Set<string>(), gate: undefined as Promise<void> | undefined }
  const driver: CacheDriver = {
    get: async (key) => held.get(key),
    set: async (key, entry) => {
      await writes.gate
      if (writes.failing.has(key)) throw new Error('OOM command not allowed when used memory > maxmemory')
      held.set(key, entry)
      return entry
    },
    purgeMark: async () => '',
    markStale: async () => 0
  }
  const listener: { onLost?: () => void, onReady?: () => void } = {}
  const bus = { ready: true, listen: (heard: { onLost: () => void, onReady: () => void }) => { Object.assign(listener, heard) }, publish: async () => {} }
  const alone = new MemoryDriver({ maxEntries: 10, maxBytes: 1_000_000, purgeMemoryMs: 60_000, now: Date.now })
  const tier = new SharedTier({ driver, bus, copies: new NearCopies({ now: Date.now }), alone, onError: () => {} })
  const entry = (body: string): CacheEntry => createEntry(200, body, Date.now(), { freshMs: 300_000, staleMs: 0 })
  return { tier, held, writes, bus, listener, alone, entry }
}

t.test('a write Redis refuses while it is up keeps that fill here, and every other key is still read from Redis', async (t) => {
  const { tier, held, writes, alone, entry } = tierOverFlakyWrites()
  const other = entry('"in Redis"')
  held.set('other', other)
  writes.failing.add('k')
  const refused = entry('"refused"')
  t.same(await tier.set('k', refused), refused, 'the fill is kept here')
  t.same(await tier.get('k'), refused, 'and served from here')
  t.same(await tier.get('other'), other, 'another key is still read from Redis')
  writes.failing.clear()
  await tier.set('next', entry('"next"'))
  await eventually(() => alone.size === 0, 'handed over once Redis takes writes')
  t.same(held.get('k'), refused, 'the refused fill is in Redis now')
})

t.test('a fill kept here while a hand-back is under way is not dropped by it, and goes with the next one', async (t) => {
  const { tier, held, writes, bus, listener, alone, entry } = tierOverFlakyWrites()
  bus.ready = false
  listener.onLost?.()
  const before = entry('"filled alone"')
  await tier.set('a', before)
  bus.ready = true
  let open = (): void => {}
  writes.gate = new Promise((resolve) => { open = resolve })
  listener.onReady?.()
  writes.failing.add('b')
  const during = entry('"refused during the hand-back"')
  const writing = tier.set('b', during)
  open()
  await writing
  await eventually(() => held.get('a') === before, 'the entry filled alone is handed over')
  t.same(await tier.get('b'), during, 'the fill kept here meanwhile is still served')
  writes.failing.clear()
  await tier.set('c', entry('"c"'))
  await eventually(() => alone.size === 0, 'and handed over with the next write Redis takes')
  t.same(held.get('b'), during)
})
