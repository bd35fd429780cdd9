import t from 'tap'
import { createEntry } from '../../../src/cache/cache-entry.ts'
import { CacheStack, type Load } from '../../../src/cache/cache-stack.ts'
import type { Priority } from '../../../src/resources.ts'
import { Clock } from '../../helper.ts'
import { instance, settingsOf, Timers } from './harness.ts'

// A caller with nothing to serve that finds a refresh under way in the background joins it; when the budget drops that
// refresh (it is the lowest class), the caller is not answered with the drop: it loads for itself, as a caller.

t.test('a caller that joined a refresh-ahead the budget dropped loads for itself, at its own class', async (t) => {
  const clock = new Clock()
  const timers = new Timers(clock)
  // One call a second, a bucket of one: the first load takes it, and refresh-ahead finds no spare budget after it.
  const gate = instance({ clock, timers, settings: settingsOf(1, 1, 1) })
  const cache = new CacheStack({
    budget: { purgeMemoryMs: 60_000, maxClaims: 1, callerMs: 600_000, callerWaitMs: 600_000, callerLoadMs: 600_000 },
    // Refresh-ahead from the last 500 ms of an entry's freshness.
    refreshAhead: { minWindowMs: 500 },
    now: clock.now,
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
  clock.advance(1_500)
  // Callers with nothing to serve keep the bucket empty: one takes the call refilled meanwhile, one waits.
  const cold = ['cold-1', 'cold-2'].map(async (key) => await cache.lookup(key, 'profile', load))
  for (let hit = 0; hit < 5; hit++) t.equal((await cache.lookup('hot', 'profile', load)).state, 'HIT')
  // The fifth hit started a refresh-ahead, waiting for spare budget; the entry expires meanwhile, and a caller joins it.
  clock.advance(600)
  const caller = Promise.resolve(cache.lookup('hot', 'profile', load))
  // Calls come a second apart (and retries are spread): ample time for the two callers ahead of it.
  await timers.advance(5_000)
  t.equal((await caller).state, 'MISS', 'answered by a load of its own, not with the refresh\'s drop')
  await Promise.all(cold)
  t.same(granted, ['caller', 'caller', 'caller', 'caller'], 'the refresh-ahead was dropped; the caller\'s own load got a call after the callers before it')
})
