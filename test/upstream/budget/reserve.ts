import t from 'tap'
import { createEntry, type CacheEntry } from '../../../src/cache/cache-entry.ts'
import { CacheStack, type Load } from '../../../src/cache/cache-stack.ts'
import type { CacheState } from '../../../src/resources.ts'
import { Clock } from '../../helper.ts'
import { instance, Outcomes, settingsOf, Timers } from './harness.ts'

// Refresh-ahead's reserve (docs/upstream-budget.md, "The reserve"): a tenth of the rate by which a hot entry's
// refresh goes ahead of waiting callers; what it does not take, callers get.

const RPS = 10
const SECONDS = 20

/** One instance alone at 10 calls/s, a bucket of 10, with callers always waiting and a refresh-ahead asked every `everyMs` (the reserve starts empty). */
async function saturated (everyMs: number) {
  const clock = new Clock()
  const timers = new Timers(clock)
  const gate = instance({ clock, timers, settings: settingsOf(RPS, 1) })
  const calls = new Outcomes(clock)
  calls.ask(gate, 'caller', RPS * SECONDS * 2)
  for (let at = 0; at < SECONDS * 1_000; at += 100) {
    if (at % everyMs === everyMs - 100) calls.ask(gate, 'refresh-ahead')
    await timers.advance(100)
  }
  // The last ones asked are served, or dropped after their wait.
  await timers.advance(1_000)
  const waiting = RPS * SECONDS * 2 - calls.grantedOf('caller')
  return { calls, waiting }
}

t.test('while callers keep the budget spent, refresh-ahead goes ahead of them by its reserve: a tenth of the rate, never more', async (t) => {
  const { calls, waiting } = await saturated(100)
  const refreshes = calls.grantedOf('refresh-ahead')
  t.ok(waiting > 0, `callers were waiting throughout (${waiting} still are)`)
  // The reserve starts empty and fills at a tenth of the rate: at 10 calls/s, one call a second, 21 in the 21 s.
  t.ok(refreshes >= SECONDS - 1 && refreshes <= SECONDS + 1, `refresh-ahead: ${refreshes} calls in ${SECONDS + 1} s`)
  t.ok(calls.peak(5_000, 'refresh-ahead') <= 2 * 5 * RPS / 10, `never more than the reserve and its depth (5 s of it) in any 5 s (${calls.peak(5_000, 'refresh-ahead')})`)
  const all = calls.granted.length
  t.ok(all >= RPS * (SECONDS + 1) && all <= RPS * (SECONDS + 1) + RPS, `the budget was spent, and kept: ${all} calls`)
  t.equal(calls.grantedOf('caller'), all - refreshes, 'callers got every call refresh-ahead did not take')
  t.ok(calls.refused.every(({ priority }) => priority === 'refresh-ahead'), 'only refresh-ahead beyond its reserve was dropped')
})

t.test('a reserve refresh-ahead does not use is the callers\' at once', async (t) => {
  const { calls } = await saturated(5_000)
  t.equal(calls.grantedOf('refresh-ahead'), SECONDS / 5, 'one refresh every 5 s, each at once')
  const all = calls.granted.length
  t.ok(all >= RPS * (SECONDS + 1), `the budget was spent: ${all} calls`)
  t.equal(calls.grantedOf('caller'), all - SECONDS / 5, 'callers got all the rest')
  t.equal(calls.refused.length, 0)
})

t.test('a hot entry is refreshed before it goes stale while callers with nothing to serve keep the budget spent', async (t) => {
  const clock = new Clock()
  const timers = new Timers(clock)
  const gate = instance({ clock, timers, settings: settingsOf(RPS, 1) })
  const freshness = { freshMs: 20_000, staleMs: 600_000 }
  const cache = new CacheStack({
    // Callers wait for as long as the test's clock runs (their real-time deadline never comes).
    budget: { purgeMemoryMs: 60_000, maxClaims: 1, callerMs: 600_000, callerWaitMs: 600_000, callerLoadMs: 600_000 },
    now: clock.now,
    freshMs: () => freshness.freshMs,
    telemetry: { cacheResult: () => {}, coalescedWaiter: () => {} },
    onError: () => {}
  })
  const loads: string[] = []
  const load: Load = async (signal, priority): Promise<CacheEntry> => {
    await gate.acquire(priority, signal)
    loads.push(priority)
    // No freshness jitter: fresh for exactly 20 s, refreshed in its last 2 s.
    return createEntry(200, `"${clock.now()}"`, clock.now(), freshness, () => 0)
  }
  t.equal((await cache.lookup('hot', 'profile', load)).state, 'MISS')
  // Far more misses than the budget can serve in the test's minute: each waits as a caller.
  const misses = Array.from({ length: RPS * 120 }, async (_, index) => await cache.lookup(`cold-${index}`, 'profile', load))
  const states: CacheState[] = []
  for (let at = 0; at < 60_000; at += 100) {
    states.push((await cache.lookup('hot', 'profile', load)).state)
    await timers.advance(100)
  }
  t.same([...new Set(states)], ['HIT'], `the hot entry answered HIT ${states.length} times in 60 s, three freshness periods`)
  t.equal(loads.filter((priority) => priority === 'refresh-ahead').length, 3, 'refreshed ahead once a period, in the last tenth of its freshness (18.4 s after each load)')
  t.ok(loads.filter((priority) => priority === 'caller').length < misses.length, 'callers were waiting all along')
  t.ok(loads.length <= RPS * 60 + RPS + 1, `the budget kept: ${loads.length} calls`)
  cache.close()
})
