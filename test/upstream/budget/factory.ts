import t from 'tap'
import { budgetSettings, stateTtlMs } from '../../../src/upstream/budget/law.ts'
import { createUpstreamBudget } from '../../../src/upstream/budget/upstream-budget.ts'
import { Clock, testLayer, testRedis } from '../../helper.ts'

const config = { UPSTREAM_TIMEOUT_MS: 5_000, UPSTREAM_MAX_RPS: 50, UPSTREAM_BURST: undefined, UPSTREAM_EXPECTED_INSTANCES: 2 }

t.test('the burst defaults to one second of the rate; a lease lasts 100 ms, shorter when the burst is small', async (t) => {
  t.same(budgetSettings(config), { rps: 50, burst: 50, instances: 2, leaseMs: 100 })
  t.equal(budgetSettings({ ...config, UPSTREAM_BURST: 10 })?.leaseMs, 25, 'two leases in flight hold at most a quarter of the bucket')
  t.equal(budgetSettings({ ...config, UPSTREAM_BURST: 1 })?.leaseMs, 20, 'never shorter than a round trip needs')
  t.equal(budgetSettings({ ...config, UPSTREAM_MAX_RPS: 0 }), undefined, '0: unlimited')
})

t.test('with Redis, the fleet\'s bucket is one key under the deployment\'s prefix, with a lifetime', async (t) => {
  const { redis, prefix } = testRedis(t)
  const layer = await testLayer(t, redis, prefix)
  const errors: unknown[] = []
  // The clock stands still: the halved rate recovers as it moves (5 calls/s a second), so a stall read it recovered.
  const budget = createUpstreamBudget({ config: { ...config, CACHE_KEY_PREFIX: prefix }, redis: layer, now: new Clock().now, onError: (error) => errors.push(error) })
  await budget.acquire('caller', AbortSignal.timeout(5_000))
  t.same(await redis.keys(`${prefix}*`), [`${prefix}upstream:budget`])
  const ttl = await redis.pttl(`${prefix}upstream:budget`)
  const settings = budgetSettings(config)
  t.ok(settings !== undefined && ttl > 0 && ttl <= stateTtlMs(settings), `${ttl} ms`)
  t.match(budget.rate(), { rps: 50, scope: 'fleet', shareRps: 25 })
  await budget.slowDown(0)
  t.equal(budget.rate()?.rps, 25, 'halved')
  t.same(errors, [])
})

t.test('without Redis, the gate keeps to the instance\'s share, on the real timers', async (t) => {
  const budget = createUpstreamBudget({ config: { ...config, UPSTREAM_BURST: 2, CACHE_KEY_PREFIX: 'unused:' }, now: Date.now, onError: () => {} })
  await budget.acquire('caller', AbortSignal.timeout(5_000))
  t.same(budget.rate(), { rps: 25, scope: 'instance', shareRps: 25, instances: 2 })
  // The bucket (one call deep for each of two instances) is empty: the next caller waits for a timer, and leaves at its deadline.
  const deadline = new AbortController()
  const waiting = budget.acquire('caller', deadline.signal)
  deadline.abort(new DOMException('deadline', 'TimeoutError'))
  await t.rejects(waiting, { code: 'UPSTREAM_BUDGET_EXHAUSTED' })
})
