import t from 'tap'
import { loadBudget } from '../../../src/load-budget.ts'
import { RecentLatency } from '../../../src/upstream/recent-latency.ts'

t.test('what the upstream has been taking: the 90th percentile of its last 50 calls, never under 100 ms', async (t) => {
  const latency = new RecentLatency()
  t.equal(latency.expectedMs, 100, 'before any call: the floor')
  latency.record(20)
  t.equal(latency.expectedMs, 100, 'a fast upstream: still the floor')
  for (let ms = 1; ms <= 10; ms++) latency.record(ms * 1_000)
  // 11 samples (20, 1000 ... 10000): the 10th of them in order.
  t.equal(latency.expectedMs, 9_000)
  for (let i = 0; i < 50; i++) latency.record(300)
  t.equal(latency.expectedMs, 300, 'only the last 50 count: a recovered upstream is trusted again')
  for (let i = 0; i < 5; i++) latency.record(4_500)
  t.equal(latency.expectedMs, 300, 'five slow calls in fifty are the slowest tenth, not yet the percentile')
  latency.record(4_500)
  t.equal(latency.expectedMs, 4_500, 'six are')
})

t.test('a short UPSTREAM_TIMEOUT_MS lowers the floor to a quarter of a load\'s time; the default setting keeps 100 ms', async (t) => {
  for (const timeoutMs of [110, 200, 1_000, 5_000]) {
    const { callerLoadMs } = loadBudget({ UPSTREAM_TIMEOUT_MS: timeoutMs })
    const latency = new RecentLatency(callerLoadMs)
    const floorMs = Math.min(100, callerLoadMs / 4)
    t.equal(latency.expectedMs, floorMs, `${timeoutMs} ms: ${floorMs} ms before any call`)
    latency.record(10)
    t.equal(latency.expectedMs, floorMs, 'a fast upstream: still the floor')
  }
  t.equal(new RecentLatency(loadBudget({ UPSTREAM_TIMEOUT_MS: 5_000 }).callerLoadMs).expectedMs, 100)
})
