import { ReplyError } from 'ioredis'
import t from 'tap'
import { createEntry, isFresh, type CacheEntry } from '../../../src/cache/cache-entry.ts'
import type { CacheDriver } from '../../../src/cache/driver.ts'
import { NearCopies } from '../../../src/cache/near-copies.ts'
import type { BusEvent } from '../../../src/redis/bus.ts'
import { loadBudget } from '../../../src/load-budget.ts'
import { Clock, eventually, quietBus, sharedTier, unitConfig } from '../../helper.ts'

const PURGE_MEMORY_MS = loadBudget(unitConfig()).purgeMemoryMs

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
  const bus = quietBus({ listen: (listener: (event: BusEvent) => void) => { onEvent = listener } })
  const { tier } = sharedTier({ driver, bus })
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
  for (const change of ['filled', 'staled', 'written', 'written meanwhile another key\'s fill', 'written meanwhile another fill of it'] as const) {
    const { tier, held, answerReads, entry, gate, hear } = tierOverHeldReads()
    held.set('k', entry('"v1"'))
    const before = tier.get('k')
    const v2 = entry('"v2"')
    if (change === 'written') {
      await tier.set('k', v2)
    } else if (change.startsWith('written meanwhile')) {
      let open = (): void => {}
      gate.write = new Promise((resolve) => { open = resolve })
      const writing = tier.set('k', v2)
      hear({ type: 'filled', key: change === 'written meanwhile another fill of it' ? 'k' : 'other', etag: '"x"' })
      open()
      await writing
    } else {
      held.set('k', v2)
      hear(change === 'filled' ? { type: 'filled', key: 'k', etag: v2.etag } : { type: 'staled', key: 'k' })
    }
    const after = tier.get('k')
    const fromWrite = change === 'written' || change === 'written meanwhile another key\'s fill'
    t.equal(answerReads(), fromWrite ? 1 : 2, `${change}: ${fromWrite ? 'served from the write' : 'a read of its own'}`)
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
  const listener: { heard?: (up: boolean) => void } = {}
  const redis = { up: true, listen: (heard: (up: boolean) => void) => { listener.heard = heard } }
  const { tier, alone } = sharedTier({ driver, redis })
  const entry = (body: string): CacheEntry => createEntry(200, body, Date.now(), { freshMs: 300_000, staleMs: 0 })
  return { tier, held, writes, redis, listener, alone, entry }
}

for (const fallback of ['Redis down before the store', 'a store Redis refuses'] as const) {
  t.test(`another instance's purge and a load kept here (${fallback}): stale if it read its mark before the purge, never fresh over it`, async (t) => {
    // Fresh: no purge, or (Redis still read) one before the load; stale: a purge after the load read its mark, or (Redis
    // gone, what was heard is all this instance knows) any purge heard: one more revalidation, never a purge undone.
    const cases = [['no purge', true], ['a purge after the load read its mark', false], ['a purge before the load', fallback === 'a store Redis refuses']] as const
    for (const [purge, fresh] of cases) {
      const up = { up: true, listen: () => {} }
      let redisMark = 'mark-1'
      const driver: CacheDriver = {
        get: async () => undefined,
        set: async () => { throw new ReplyError('OOM command not allowed') },
        purgeMark: async () => { if (!up.up) throw new Error('redis is down'); return redisMark },
        markStale: async () => 0
      }
      let hear: (event: BusEvent) => void = () => {}
      const bus = quietBus({ listen: (listener: (event: BusEvent) => void) => { hear = listener } })
      const { tier } = sharedTier({ driver, bus, redis: up })
      const purgeElsewhere = (): void => { redisMark = 'mark-2'; hear({ type: 'staled', key: 'k' }) }
      if (purge === 'a purge before the load') purgeElsewhere()
      const mark = await tier.purgeMark('k')
      if (purge === 'a purge after the load read its mark') purgeElsewhere()
      if (fallback === 'Redis down before the store') up.up = false
      const loaded = createEntry(200, '"loaded"', Date.now(), { freshMs: 300_000, staleMs: 60_000 })
      const stored = await tier.set('k', loaded, mark)
      const served = tier.held('k') ?? await tier.get('k')
      t.equal(stored !== undefined && isFresh(stored, Date.now()), fresh, `${purge}: stored ${fresh ? 'fresh' : 'stale'}`)
      t.equal(served !== undefined && isFresh(served, Date.now()), fresh, `${purge}: served ${fresh ? 'fresh' : 'stale'}`)
    }
  })
}

t.test('a purge heard during a load: Redis\'s mark orders the two while Redis has it; lost, the fill is stored stale', async (t) => {
  // What Redis holds when the fill is stored: the mark the load read (the purge came before the load, heard late), a
  // later one (the purge came during it), or none (Redis restarted, or the mark evicted).
  for (const [atStore, fresh] of [['the mark the load read', true], ['a later mark', false], ['no mark', false]] as const) {
    let redisMark = 'mark-1'
    const written: CacheEntry[] = []
    const driver: CacheDriver = {
      get: async () => undefined,
      // As the store script: stale when Redis's mark is not the one the load read.
      set: async (_key, entry, mark) => {
        const stored = redisMark !== '' && redisMark !== mark ? { ...entry, freshUntil: entry.storedAt } : entry
        written.push(stored)
        return stored
      },
      purgeMark: async () => redisMark,
      markStale: async () => 0
    }
    let hear: (event: BusEvent) => void = () => {}
    const { tier } = sharedTier({ driver, bus: quietBus({ listen: (listener: (event: BusEvent) => void) => { hear = listener } }) })
    const mark = await tier.purgeMark('k')
    hear({ type: 'staled', key: 'k' })
    redisMark = atStore === 'the mark the load read' ? 'mark-1' : atStore === 'a later mark' ? 'mark-2' : ''
    const stored = await tier.set('k', createEntry(200, '"loaded"', Date.now(), { freshMs: 300_000, staleMs: 60_000 }), mark)
    t.equal(written.length, 1, `${atStore}: written once`)
    t.equal(stored !== undefined && isFresh(stored, Date.now()), fresh, `${atStore}: stored ${fresh ? 'fresh' : 'stale'}`)
  }
})

/** Redis as the store script sees it: a fill is stale where Redis has a mark other than the load's; a mark lasts purgeMemoryMs. */
function expiringMarks (clock: Clock) {
  const state = { mark: 'mark-0', until: Infinity }
  const current = (): string => clock.now() < state.until ? state.mark : ''
  const driver: CacheDriver = {
    get: async () => undefined,
    set: async (_key, entry, mark = '') => current() !== '' && current() !== mark ? { ...entry, freshUntil: entry.storedAt } : entry,
    purgeMark: async () => current(),
    markStale: async () => 0
  }
  const purge = (): void => { state.mark = `mark-${Math.random()}`; state.until = clock.now() + PURGE_MEMORY_MS }
  return { driver, purge, state }
}

t.test('a load begun after a purge whose memory ends during the load (here and in Redis) is stored fresh', async (t) => {
  const clock = new Clock()
  const redis = expiringMarks(clock)
  let hear: (event: BusEvent) => void = () => {}
  const { tier } = sharedTier({ driver: redis.driver, now: clock.now, bus: quietBus({ listen: (listener: (event: BusEvent) => void) => { hear = listener } }) })
  redis.purge()
  hear({ type: 'staled', key: 'k' })
  clock.advance(PURGE_MEMORY_MS - 1_000)
  const mark = await tier.purgeMark('k')
  clock.advance(2_000)
  const stored = await tier.set('k', createEntry(200, '"after the purge"', clock.now(), { freshMs: 300_000, staleMs: 60_000 }), mark)
  t.ok(stored !== undefined && isFresh(stored, clock.now()), 'fresh: no revalidation more')
})

t.test('a load whose mark was read while Redis was down here, a purge heard during it, then Redis losing the mark: stored stale', async (t) => {
  const clock = new Clock()
  const redis = expiringMarks(clock)
  const up = { up: false, listen: () => {} }
  let hear: (event: BusEvent) => void = () => {}
  const { tier } = sharedTier({ driver: redis.driver, redis: up, now: clock.now, bus: quietBus({ listen: (listener: (event: BusEvent) => void) => { hear = listener } }) })
  const mark = await tier.purgeMark('k')
  up.up = true
  redis.purge()
  hear({ type: 'staled', key: 'k' })
  redis.state.until = 0
  const stored = await tier.set('k', createEntry(200, '"before the purge"', clock.now(), { freshMs: 300_000, staleMs: 60_000 }), mark)
  t.notOk(stored !== undefined && isFresh(stored, clock.now()), 'stale: the purge is not undone')
})

t.test('a purge made here during a load is not undone by it: Redis refusing both writes, or going away after taking the fill', async (t) => {
  for (const variant of ['Redis refuses the purge and the fill (OOM)', 'Redis takes the fill, the purge after it, then goes away'] as const) {
    const up = { up: true, listen: () => {} }
    let release: () => void = () => {}
    const writeHeld = new Promise<void>((resolve) => { release = resolve })
    const refusing = variant.startsWith('Redis refuses')
    const driver: CacheDriver = {
      get: async () => undefined,
      set: refusing ? async () => { throw new ReplyError('OOM command not allowed') } : async (_key, entry) => { await writeHeld; up.up = false; return entry },
      purgeMark: async () => 'mark-1',
      markStale: async () => { if (refusing) throw new ReplyError('OOM command not allowed'); return 1 }
    }
    const { tier } = sharedTier({ driver, redis: up })
    const mark = await tier.purgeMark('k')
    const loaded = createEntry(200, '"loaded before the purge"', Date.now(), { freshMs: 300_000, staleMs: 60_000 })
    let stored: CacheEntry | undefined
    if (refusing) {
      await t.rejects(tier.markStale(['k'], Date.now()), 'the purge says Redis refused it')
      stored = await tier.set('k', loaded, mark)
    } else {
      const writing = tier.set('k', loaded, mark)
      await tier.markStale(['k'], Date.now())
      release()
      stored = await writing
    }
    const held = tier.held('k')
    t.notOk(stored !== undefined && isFresh(stored, Date.now()), `${variant}: not stored fresh`)
    t.notOk(held !== undefined && isFresh(held, Date.now()), `${variant}: not held fresh here`)
  }
})

t.test('a purge made here that Redis took, then a load after it whose fill Redis refuses: kept fresh, not revalidated again and again', async (t) => {
  let redisMark = 'mark-1'
  const driver: CacheDriver = {
    get: async () => undefined,
    set: async () => { throw new ReplyError('OOM command not allowed') },
    purgeMark: async () => redisMark,
    markStale: async () => { redisMark = 'mark-2'; return 1 }
  }
  const { tier } = sharedTier({ driver })
  await tier.markStale(['k'], Date.now())
  for (let fill = 1; fill <= 3; fill++) {
    const mark = await tier.purgeMark('k')
    const stored = await tier.set('k', createEntry(200, `"v${fill}"`, Date.now(), { freshMs: 300_000, staleMs: 60_000 }), mark)
    t.ok(stored !== undefined && isFresh(stored, Date.now()), `fill ${fill}, after the purge: fresh`)
  }
})

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
  const { tier, held, writes, redis, listener, alone, entry } = tierOverFlakyWrites()
  redis.up = false
  listener.heard?.(false)
  const before = entry('"filled alone"')
  await tier.set('a', before)
  redis.up = true
  let open = (): void => {}
  writes.gate = new Promise((resolve) => { open = resolve })
  listener.heard?.(true)
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

/** A tier on a moved clock over a driver whose reads fail while `failing` (a shard away while Redis answers), with a bus the test turns. */
function tierOverFailingReads () {
  const clock = new Clock()
  const held = new Map<string, CacheEntry>()
  const reads = { failing: false, count: 0 }
  const driver: CacheDriver = {
    get: async (key) => {
      reads.count++
      // A reply error leaves Redis's health up (RedisHealth): the shard of this key is away, not Redis.
      if (reads.failing) throw new ReplyError('CLUSTERDOWN The cluster is down')
      return held.get(key)
    },
    set: async (key, entry) => { held.set(key, entry); return entry },
    purgeMark: async () => '',
    markStale: async () => 0
  }
  const turns: { ready?: () => void, lost?: () => void, event?: (event: BusEvent) => void } = {}
  const bus = quietBus({ listen: (heard) => { turns.event = heard }, listenReady: (heard) => { turns.ready = heard }, listenLost: (heard) => { turns.lost = heard } })
  const listener: { heard?: (up: boolean) => void } = {}
  const redis = { up: true, listen: (heard: (up: boolean) => void) => { listener.heard = heard } }
  const { tier, alone } = sharedTier({ driver, bus, redis, now: clock.now })
  const entry = (body: string): CacheEntry => createEntry(200, body, clock.now(), { freshMs: 60_000, staleMs: 0 })
  return { clock, tier, alone, held, reads, turns, redis, listener, entry }
}

t.test('a key Redis cannot read while it is up is answered with what this instance last knew of it, while no event can have been missed since', async (t) => {
  const { clock, tier, held, reads, turns, entry } = tierOverFailingReads()
  const v1 = entry('"v1"')
  held.set('k', v1)
  t.same(await tier.get('k'), v1, 'read from Redis, and copied')
  clock.advance(5_000)
  t.equal(tier.held('k'), undefined, 'past its few seconds the copy answers no hit')
  reads.failing = true
  t.same(await tier.get('k'), v1, 'the read fails: what was last known answers, not a load')
  await t.rejects(tier.get('other'), /CLUSTERDOWN/, 'a key never read here is still the cache\'s failure (a load)')
  turns.event?.({ type: 'staled', key: 'k' })
  await t.rejects(tier.get('k'), /CLUSTERDOWN/, 'a purge elsewhere drops what was known')

  reads.failing = false
  t.same(await tier.get('k'), v1)
  turns.lost?.()
  clock.advance(5_000)
  reads.failing = true
  await t.rejects(tier.get('k'), /CLUSTERDOWN/, 'the bus lost: events may have been missed, nothing is known')
  reads.failing = false
  turns.ready?.()
  t.same(await tier.get('k'), v1, 'the bus back: copied anew')
  clock.advance(5_000)
  reads.failing = true
  t.same(await tier.get('k'), v1, 'and known again')
  clock.advance(5_000)
  await t.rejects(tier.get('k'), /CLUSTERDOWN/, 'for 10 s at most')
  reads.failing = false
  const brief = createEntry(200, '"brief"', clock.now(), { freshMs: 3_000, staleMs: 0 }, () => 0)
  held.set('b', brief)
  await tier.get('b')
  reads.failing = true
  clock.advance(2_999)
  t.same(await tier.get('b'), brief)
  clock.advance(1)
  await t.rejects(tier.get('b'), /CLUSTERDOWN/, 'and never past the entry\'s freshness')
})

t.test('when Redis goes away, every entry still known is kept alone for its life, not only the copies of the last few seconds', async (t) => {
  const { clock, tier, alone, held, redis, listener, entry } = tierOverFailingReads()
  const known = entry('"known"')
  held.set('k', known)
  await tier.get('k')
  clock.advance(9_000)
  redis.up = false
  listener.heard?.(false)
  t.equal(alone.size, 1, 'adopted')
  t.same(tier.held('k'), known, 'and served while Redis is away')
})

t.test('what was known when the bus was lost is adopted if Redis goes away within a copy\'s 2 s (a primary\'s death closes the subscription first), fresh only until 2 s after the loss (fleet simulation seed 238)', async (t) => {
  for (const afterMs of [0, 1_000, 1_999, 2_000]) {
    const { clock, tier, alone, held, redis, listener, turns, entry } = tierOverFailingReads()
    held.set('k', entry('"known before the loss"'))
    await tier.get('k')
    clock.advance(3_000)
    turns.lost?.()
    clock.advance(afterMs)
    redis.up = false
    listener.heard?.(false)
    if (afterMs >= 2_000) {
      t.equal(alone.size, 0, `Redis gone ${afterMs} ms after the bus: not adopted`)
      continue
    }
    const adopted = tier.held('k')
    t.ok(adopted !== undefined && isFresh(adopted, clock.now()), `Redis gone ${afterMs} ms after the bus: adopted, and fresh`)
    clock.advance(1_999 - afterMs)
    const still = tier.held('k')
    t.ok(still !== undefined && isFresh(still, clock.now()), 'still fresh 1,999 ms after the loss')
    clock.advance(1)
    const later = tier.held('k')
    t.ok(later !== undefined && !isFresh(later, clock.now()), 'stale from 2 s after the loss: a purge missed then is served as a copy\'s would be, no longer')
  }
})

t.test('a copy made while the bus was lost is not adopted when Redis goes away: a purge elsewhere may have been missed (fleet simulation seed 238)', async (t) => {
  const { tier, alone, held, redis, listener, turns, entry } = tierOverFailingReads()
  turns.lost?.()
  held.set('k', entry('"copied while the bus was lost"'))
  await tier.get('k')
  t.ok(tier.held('k') !== undefined, 'it answers its few seconds')
  redis.up = false
  listener.heard?.(false)
  t.equal(alone.size, 0, 'but is not kept for its whole life')
})

t.test('a read under way is copied unless its own key changed meanwhile, or more keys changed than are remembered', async (t) => {
  const clock = new Clock()
  const v1 = createEntry(200, '"v1"', clock.now(), { freshMs: 60_000, staleMs: 0 })
  for (const [changes, copied] of [[1, true], [10_000, true], [10_001, false]] as const) {
    const copies = new NearCopies({ now: clock.now })
    const started = copies.generation
    for (let i = 0; i < changes; i++) copies.hear({ type: 'staled', key: `other-${i}` })
    copies.keep('k', v1, started)
    t.equal(copies.get('k') !== undefined, copied, `${changes} other keys changed during the read: ${copied ? 'copied' : 'not copied'}`)
  }
  const copies = new NearCopies({ now: clock.now })
  const started = copies.generation
  copies.hear({ type: 'filled', key: 'k', etag: '"v2"' })
  copies.keep('k', v1, started)
  t.equal(copies.get('k'), undefined, 'its own key filled elsewhere during the read: not copied')
})
