import t from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Pool } from 'undici'
import { busiestWindow, callerShares, closedLoop, outcomeOf, pacedLoop, perSecond, Tally } from '../budget-load.ts'
import { budgetSection, budgetVerdicts, hotMix, share, type BudgetResult } from '../budget-report.ts'
import { budgetClasses } from '../budget.ts'
import { renderReport } from '../render.ts'
import type { BenchResults } from '../results.ts'

// The budget phase's arithmetic (issue 25 point 6): the busiest window, what callers got, the verdicts.

t.test('outcomes: a 200 by its X-Cache, an error by its code, no answer as 0; in the issue\'s terms', async (t) => {
  t.equal(outcomeOf(200, 'HIT', ''), '200 HIT')
  t.equal(outcomeOf(200, undefined, ''), '200 none')
  t.equal(outcomeOf(503, undefined, '{"statusCode":503,"code":"UPSTREAM_BUDGET_EXHAUSTED"}'), '503 UPSTREAM_BUDGET_EXHAUSTED')
  t.equal(outcomeOf(502, undefined, 'not json'), '502')
  t.equal(outcomeOf(0, undefined, ''), '0')
  t.same(callerShares({ '200 HIT': 5, '200 MISS': 2, '200 BYPASS': 1, '200 STALE': 3, '503 UPSTREAM_BUDGET_EXHAUSTED': 4, 503: 1, '504 UPSTREAM_TIMEOUT': 2, 0: 1 }),
    { fresh: 8, stale: 3, unavailable: 5, timeout: 2, other: 1 })
})

t.test('a tally counts outcomes, late answers (strictly past the deadline) and when each outcome first came', async (t) => {
  const tally = new Tally(5_000, 1_000)
  tally.add('200 HIT', 2, 1_000)
  tally.add('200 STALE', 3, 19_500)
  tally.add('503 UPSTREAM_BUDGET_EXHAUSTED', 5_000, 20_000)
  tally.add('503 UPSTREAM_BUDGET_EXHAUSTED', 5_001, 21_000)
  tally.add('200 STALE', 4, 25_000)
  const summary = tally.summary()
  t.equal(summary.requests, 5)
  t.same(summary.outcomes, { '200 HIT': 1, '200 STALE': 2, '503 UPSTREAM_BUDGET_EXHAUSTED': 2 })
  t.equal(summary.overDeadline, 1)
  t.same(summary.lateOutcomes, { '503 UPSTREAM_BUDGET_EXHAUSTED': 1 })
  t.same(summary.firstSeenSeconds, { '200 HIT': 0, '200 STALE': 18.5, '503 UPSTREAM_BUDGET_EXHAUSTED': 19 })
  t.equal(summary.maxMs, 5_001)
  t.equal(hotMix(summary), 'STALE 2 (40.0%, first at 18.5 s), 503 UPSTREAM_BUDGET_EXHAUSTED 2 (40.0%, first at 19.0 s), HIT 1 (20.0%)')
})

t.test('shares are never rounded to 100% or 0% when they are not', async (t) => {
  t.equal(share(9_999, 10_000), '99.9%')
  t.equal(share(10_000, 10_000), '100.0%')
  t.equal(share(1, 100_000), '0.1%')
  t.equal(share(0, 5), '0.0%')
  t.equal(share(0, 0), 'n/a')
})

t.test('the busiest window is the most calls in any second [t, t + 1 s), from each call\'s time, wherever it starts', async (t) => {
  // A call every 10 ms for 3 s, and two bursts of 20 either side of the first whole second's end: each whole second
  // holds one of them, a window from 20 ms holds both.
  const times = [...Array.from({ length: 300 }, (_, index) => 1_000 + index * 10), ...Array(20).fill(1_990), ...Array(20).fill(2_010)].sort((a, b) => a - b)
  t.same(busiestWindow(times), { calls: 140, startMs: 20 })
  t.same(perSecond(times), [120, 120, 100], 'whole seconds from the first call understate it')
  t.same(busiestWindow([0, 999.9, 1_000]), { calls: 2, startMs: 0 }, 'a window is half-open: a second later is the next window\'s')
  t.same(busiestWindow([]), { calls: 0, startMs: 0 })
  t.same(perSecond([]), [])
})

t.test('the budget counters are summed over the instances, less what they counted before', async (t) => {
  const text = (caller: number, refresh: number, dropped: number): string => [
    '# HELP pbff_upstream_budget_calls_total x',
    `pbff_upstream_budget_calls_total{priority="caller"} ${caller}`,
    `pbff_upstream_budget_calls_total{priority="refresh-ahead"} ${refresh}`,
    `pbff_upstream_budget_deferred_total{priority="caller"} ${caller * 2}`,
    'pbff_upstream_budget_dropped_total{priority="caller",reason="deadline"} 0',
    `pbff_upstream_budget_dropped_total{priority="refresh-ahead",reason="waited_too_long"} ${dropped}`
  ].join('\n')
  t.same(budgetClasses([text(20, 0, 0), text(0, 0, 0)], [text(70, 3, 1), text(30, 2, 4)]), {
    calls: { caller: 80, 'refresh-ahead': 5 },
    deferred: { caller: 160 },
    dropped: { 'refresh-ahead waited_too_long': 5 }
  })
})

t.test('the loads: a closed loop over the pools, and a paced stream of every hot path on the next pool in turn', async (t) => {
  const seen: Array<{ server: number, url: string }> = []
  const servers = await Promise.all([0, 1, 2].map(async (server) => {
    const http = createServer((request, response) => {
      seen.push({ server, url: request.url ?? '' })
      if (request.url === '/z/refused') {
        response.writeHead(503, { 'retry-after': '2' })
        response.end('{"code":"UPSTREAM_BUDGET_EXHAUSTED"}')
        return
      }
      response.setHeader('x-cache', 'HIT')
      response.end('{}')
    })
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
    return http
  }))
  const pools = servers.map((server) => new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { connections: 4 }))
  t.teardown(async () => {
    await Promise.all(pools.map(async (pool) => { await pool.close() }))
    for (const server of servers) server.close()
  })
  let asked = 0
  const zipf = new Tally(1_000)
  const pauses: number[] = []
  const pause = async (ms: number): Promise<void> => { pauses.push(ms) }
  await closedLoop({ pools, connections: 6, nextPath: () => asked === 30 ? '/z/refused' : `/z/${asked}`, running: () => asked++ < 60, tally: zipf, pause })
  t.equal(zipf.summary().requests, 60)
  t.same(pauses, [2_000], 'a caller told to come back later (Retry-After) pauses that long; the others ask again at once')
  t.same(new Set(seen.map((request) => request.server)), new Set([0, 1, 2]))
  seen.length = 0
  let ticks = 0
  const hot = new Tally(1_000)
  await pacedLoop({ pools, paths: ['/a', '/b'], intervalMs: 10, running: () => ticks++ < 3, tally: hot })
  t.same(hot.summary().outcomes, { '200 HIT': 6 })
  t.same(seen.filter((request) => request.url === '/a').map((request) => request.server).sort(), [0, 1, 2], 'each hot path on every instance')
})

function budget (overrides: { busiest?: number, hot?: Record<string, number>, late?: number } = {}): BudgetResult {
  const outcomes = (counts: Record<string, number>, late = 0): BudgetResult['hot']['result'] => ({
    requests: Object.values(counts).reduce((sum, n) => sum + n, 0),
    outcomes: counts,
    overDeadline: late,
    lateOutcomes: late === 0 ? {} : { '503 UPSTREAM_BUDGET_EXHAUSTED': late },
    lateBySecond: late === 0 ? {} : { 4: late },
    firstSeenSeconds: { '200 HIT': 0 },
    p50Ms: 1,
    p99Ms: 4_900,
    maxMs: late === 0 ? 4_990 : 5_040
  })
  return {
    instances: 3,
    maxRps: 50,
    burst: 50,
    profileTtlSeconds: 20,
    deadlineMs: 5_000,
    upstreamLatencyMs: 50,
    seconds: 60,
    instanceCores: [0.5, 0.45, 0.52],
    generator: { cores: 0.3, lagP99Ms: 20, lagMaxMs: 40 },
    zipf: { usernames: 100_000, exponent: 1.1, connections: 600, result: outcomes({ '200 HIT': 50_000, '200 MISS': 2_900, '200 STALE': 4_000, '503 UPSTREAM_BUDGET_EXHAUSTED': 3_000 }, overrides.late) },
    hot: { usernames: 20, intervalMs: 100, result: outcomes(overrides.hot ?? { '200 HIT': 12_000 }) },
    upstream: { calls: 3_010, busiest: { calls: overrides.busiest ?? 98, startMs: 100 }, perSecond: [98, 50, 51] },
    redisDown: { samples: 63, perInstance: [0, 0, 0] },
    instanceLag: [{ p99Ms: 12, maxMs: 40 }, { p99Ms: 11, maxMs: 35 }, { p99Ms: 13, maxMs: 52 }],
    classes: { calls: { caller: 2_990, 'refresh-ahead': 20 }, deferred: { caller: 2_900 }, dropped: { 'caller deadline': 3_000 } }
  }
}

t.test('verdicts: the busiest window against the rate plus its burst, every hot answer a HIT, nobody late', async (t) => {
  t.same(budgetVerdicts({}), [])
  t.same(budgetVerdicts({ budget: budget() }).map((verdict) => verdict.pass), [true, true, true])
  t.same(budgetVerdicts({ budget: budget({ busiest: 101, hot: { '200 HIT': 11_999, '200 STALE': 1 }, late: 2 }) }).map((verdict) => verdict.pass), [false, false, false])
  t.equal(budgetVerdicts({ budget: budget({ busiest: 100 }) })[0]?.pass, true, 'the bound itself is within it')
  t.match(budgetVerdicts({ budget: budget({ hot: { '200 HIT': 11_999, '200 STALE': 1 } }) })[1]?.measured, /HIT 11,999 \(99\.9%\), STALE 1 \(0\.1%\)/)
})

t.test('the report has the budget section and its targets only when the phase ran', async (t) => {
  t.same(budgetSection({}), [])
  const machine = { date: '2026-01-01T00:00:00Z', commit: 'abc1234', cores: 2, cpuModel: 'CPU', node: 'v24', platform: 'linux x64', loadAverage: [1, 1, 1] }
  const settings = { phases: ['budget'], upstreamLatencyMs: 50, connections: 50, rounds: 5, roundSeconds: 5, logLevel: 'info', warmedUsernames: 100, buildTypeErrors: 0 }
  const report = renderReport({ machine, settings, budget: budget({ late: 2 }) } satisfies BenchResults)
  t.match(report, /## Upstream budget: 3 instances on one Redis, UPSTREAM_MAX_RPS=50 \(burst 50\), 60 s/)
  t.match(report, /\| calls in the busiest 1-second window \(bound: 50 \+ burst 50 = 100\) \| \*\*98\*\* \(from 0\.10 s\) \|/)
  t.match(report, /\| calls let through, by class \| caller: 2,990, refresh-ahead: 20 \|/)
  t.match(report, /\| Zipf over 100,000 \| 59,900 \(998\/s\) \| 52,900 \| 4,000 \| 3,000 \| 0 \| 0 \|/)
  t.match(report, /\| 2 \(503 UPSTREAM_BUDGET_EXHAUSTED: 2\) \|/)
  t.match(report, /Hot usernames' X-Cache: HIT 12,000 \(100\.0%\)\./)
  t.match(report, /\| the instances' event loop delay in their worst second, p99 \/ max \| 12\.0 ms \/ 40\.0 ms, 11\.0 ms \/ 35\.0 ms, 13\.0 ms \/ 52\.0 ms \|/)
  t.match(report, /past their deadline, by the second their request was sent in: 4 s: 2\./)
  t.match(report, /\| Budget: callers answered within their deadline \| none past 5,000 ms, none unanswered \| 2 past it, 0 unanswered; slowest 5040\.0 ms \| MISS \|/)
})
