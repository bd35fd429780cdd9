import t, { type Test } from 'tap'
import { createEntry } from '../../../src/cache/cache-entry.ts'
import { CacheStack, type CacheFailure, type CacheStackOptions, type Load } from '../../../src/cache/cache-stack.ts'
import type { Priority } from '../../../src/resources.ts'
import { Clock, settle } from '../../helper.ts'
import { instance, settingsOf, Timers } from './harness.ts'

// A caller with nothing to serve that finds a refresh under way in the background joins it; when the budget drops that
// refresh (it is the lowest class), the caller is not answered with the drop: it loads for itself, as a caller.

/** A cache on `clock` whose callers' `times` run on real timers, with the process kept alive (in the app, its server does that). */
function cacheWithDeadlines (t: Test, clock: Clock, times: { callerMs: number, callerWaitMs: number, callerLoadMs: number }, onError: CacheStackOptions['onError'] = () => {}): CacheStack {
  const cache = new CacheStack({
    budget: { purgeMemoryMs: 60_000, maxClaims: 1, ...times },
    now: clock.now,
    freshMs: () => 2_000,
    telemetry: { cacheResult: () => {}, coalescedWaiter: () => {} },
    onError
  })
  const alive = setInterval(() => {}, 1_000)
  t.teardown(() => { clearInterval(alive); cache.close() })
  return cache
}

t.test('a caller that joined a refresh-ahead the budget dropped loads for itself, at its own class', async (t) => {
  const clock = new Clock()
  const timers = new Timers(clock)
  // One call a second, a bucket of one: the first load takes it, and refresh-ahead finds no spare budget after it.
  const gate = instance({ clock, timers, settings: settingsOf(1, 1, 1) })
  const cache = new CacheStack({
    budget: { purgeMemoryMs: 60_000, maxClaims: 1, callerMs: 600_000, callerWaitMs: 600_000, callerLoadMs: 600_000 },
    now: clock.now,
    freshMs: () => 2_000,
    telemetry: { cacheResult: () => {}, coalescedWaiter: () => {} },
    onError: () => {}
  })
  t.teardown(() => { cache.close() })
  const granted: Priority[] = []
  const load: Load = async (signal, priority) => {
    await gate.acquire(priority, signal)
    granted.push(priority)
    // Fresh for 2 s, then gone: nothing stale to serve.
    return createEntry(200, '"v"', clock.now(), { freshMs: 2_000, staleMs: 0 }, () => 0)
  }
  t.equal((await cache.lookup('hot', 'profile', load)).state, 'MISS')
  // Into the last tenth of its freshness, where refresh-ahead starts.
  clock.advance(1_800)
  // Callers with nothing to serve keep the bucket empty: one takes the call refilled meanwhile, one waits.
  const cold = ['cold-1', 'cold-2'].map(async (key) => await cache.lookup(key, 'profile', load))
  for (let hit = 0; hit < 5; hit++) t.equal((await cache.lookup('hot', 'profile', load)).state, 'HIT')
  // The fifth hit started a refresh-ahead, waiting for spare budget; the entry expires meanwhile, and a caller joins it.
  clock.advance(300)
  const caller = Promise.resolve(cache.lookup('hot', 'profile', load))
  // Calls come a second apart (and retries are spread): ample time for the two callers ahead of it.
  await timers.advance(5_000)
  t.equal((await caller).state, 'MISS', 'answered by a load of its own, not with the refresh\'s drop')
  await Promise.all(cold)
  t.same(granted, ['caller', 'caller', 'caller', 'caller'], 'the refresh-ahead was dropped; the caller\'s own load got a call after the callers before it')
})

t.test('a caller out of time while the budget holds the revalidation it joined is refused for want of budget, not timed out (fleet simulation seed 13)', async (t) => {
  const clock = new Clock()
  const timers = new Timers(clock)
  const gate = instance({ clock, timers, settings: settingsOf(1, 1, 1) })
  // A caller's time runs on real timers: short, and the budget's clock stands still meanwhile.
  const cache = cacheWithDeadlines(t, clock, { callerMs: 200, callerWaitMs: 150, callerLoadMs: 120 })
  const load: Load = Object.assign(async (signal: AbortSignal, priority: Priority) => {
    await gate.acquire(priority, signal)
    return createEntry(200, '"v"', clock.now(), { freshMs: 2_000, staleMs: 1_000 }, () => 0)
  }, { refusesNow: (priority: Priority, deadlineAt: number) => gate.refusesNow(priority, deadlineAt) })
  t.equal((await cache.lookup('member', 'profile', load)).state, 'MISS')
  clock.advance(2_500)
  // A caller with nothing to serve takes the call refilled meanwhile; the stale entry's revalidation waits behind it.
  const cold = Promise.resolve(cache.lookup('cold', 'profile', load)).catch((error: unknown) => error)
  t.equal((await cache.lookup('member', 'profile', load)).state, 'STALE')
  // Past what may be served: the next caller has nothing but the revalidation to join. It arrived 130 ms ago (the
  // clock stands still while its real-time wait runs out): past its load's deadline, short of its wait's.
  clock.advance(1_000)
  await t.rejects(Promise.resolve(cache.lookup('member', 'profile', load, undefined, { elapsedTime: 130 })), { code: 'UPSTREAM_BUDGET_EXHAUSTED' })
  await cold
})

t.test('a caller with nothing to serve takes over a background load the budget holds: dropped unsent, and the caller\'s own load goes at its class (fleet simulation seed 13)', async (t) => {
  const clock = new Clock()
  const errors: CacheFailure[] = []
  // Should the caller wait behind the held load instead, its real-time deadline ends the test with a 504.
  const cache = cacheWithDeadlines(t, clock, { callerMs: 5_000, callerWaitMs: 5_000, callerLoadMs: 4_900 }, (_error, _key, failure) => { errors.push(failure) })
  const sent: Priority[] = []
  let backgroundDropped = false
  const load: Load = async (signal, priority) => {
    // The budget's spare share is short: a background call waits until nobody wants it; a caller's goes at once.
    if (priority !== 'caller') {
      await new Promise((_resolve, reject) => {
        signal.addEventListener('abort', () => { backgroundDropped = true; reject(signal.reason) }, { once: true })
      })
    }
    sent.push(priority)
    return createEntry(200, `"v${sent.length}"`, clock.now(), { freshMs: 2_000, staleMs: 1_000 }, () => 0)
  }
  t.equal((await cache.lookup('member', 'profile', load)).state, 'MISS')
  clock.advance(2_500)
  t.equal((await cache.lookup('member', 'profile', load)).state, 'STALE', 'served stale, its revalidation held by the budget')
  // Past what may be served: the next caller has nothing but the held revalidation to join.
  clock.advance(1_000)
  const served = await cache.lookup('member', 'profile', load)
  t.equal(served.state, 'MISS')
  t.equal(served.entry.body, '"v2"', 'answered by its own load')
  t.ok(backgroundDropped, 'the held revalidation was dropped unsent')
  t.same(sent, ['caller', 'caller'], 'one call for the miss, one for the caller that took over; none for the revalidation')
  t.same(errors, [], 'a revalidation taken over is no failure')
})

t.test('a caller that joins a background load whose call is sent waits for its answer: no second call', async (t) => {
  const clock = new Clock()
  const cache = cacheWithDeadlines(t, clock, { callerMs: 5_000, callerWaitMs: 5_000, callerLoadMs: 4_900 })
  let calls = 0
  let answer: () => void = () => {}
  const load: Load = async (_signal, priority) => {
    calls++
    // Sent: a call on the wire goes on whoever leaves (the edge drops a call only before it is sent).
    if (priority !== 'caller') await new Promise<void>((resolve) => { answer = resolve })
    return createEntry(200, `"v${calls}"`, clock.now(), { freshMs: 2_000, staleMs: 1_000 }, () => 0)
  }
  t.equal((await cache.lookup('member', 'profile', load)).state, 'MISS')
  clock.advance(2_500)
  t.equal((await cache.lookup('member', 'profile', load)).state, 'STALE')
  clock.advance(1_000)
  const caller = Promise.resolve(cache.lookup('member', 'profile', load))
  await settle()
  answer()
  const served = await caller
  t.equal(served.state, 'MISS')
  t.equal(served.entry.body, '"v2"', 'the revalidation\'s answer')
  t.equal(calls, 2, 'no call of its own')
})
