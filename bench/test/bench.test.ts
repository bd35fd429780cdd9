import t from 'tap'
import type { RoundResult } from '../load.ts'
import { redisTroubleVerdicts, renderReport, summarize, verdicts, type BenchResults, type ShelterRound } from '../report.ts'
import { median, percentile } from '../stats.ts'
import { seededRandom, zipfSampler } from '../zipf.ts'

// The benchmark's own arithmetic: if it is wrong, every figure in bench/results/latest.md is.

t.test('median and percentile', async (t) => {
  t.equal(median([3, 1, 2]), 2)
  t.equal(median([4, 1, 3, 2]), 2.5)
  t.ok(Number.isNaN(median([])))
  const hundred = Array.from({ length: 100 }, (_, index) => 100 - index)
  t.equal(percentile(hundred, 50), 50)
  t.equal(percentile(hundred, 99), 99)
  t.equal(percentile(hundred, 100), 100)
  t.equal(percentile([7], 99), 7)
  t.ok(Number.isNaN(percentile([], 50)))
})

t.test('the Zipf sampler is deterministic, stays in range and favours low ranks', async (t) => {
  const draw = (seed: number): number[] => {
    const sample = zipfSampler(1_000, 1.1, seededRandom(seed))
    return Array.from({ length: 20_000 }, sample)
  }
  const ranks = draw(42)
  t.same(ranks.slice(0, 50), draw(42).slice(0, 50), 'same seed, same sequence')
  t.not(ranks.slice(0, 50).join(), draw(43).slice(0, 50).join(), 'another seed, another sequence')
  t.ok(ranks.every((rank) => Number.isInteger(rank) && rank >= 1 && rank <= 1_000))
  const count = (rank: number): number => ranks.filter((value) => value === rank).length
  // P(1) / P(2) = 2^1.1 ≈ 2.14, and rank 1 holds 1 / H(1000, 1.1) ≈ 17% of the draws.
  t.ok(count(1) / count(2) > 1.8 && count(1) / count(2) < 2.5, `rank 1 / rank 2 = ${count(1) / count(2)}`)
  t.ok(count(1) / ranks.length > 0.15 && count(1) / ranks.length < 0.2, `rank 1 share ${count(1) / ranks.length}`)
  t.ok(new Set(ranks).size > 500, 'a long tail')
  t.throws(() => zipfSampler(0, 1.1, Math.random), RangeError)
  t.throws(() => zipfSampler(10, 0, Math.random), RangeError)
})

function round (requestsPerSecond: number, p99Ms: number, xCache: Record<string, number> = { HIT: 1_000 }): RoundResult {
  const responses = Object.values(xCache).reduce((sum, n) => sum + n, 0)
  return { requestsPerSecond, p50Ms: p99Ms / 3, p99Ms, responses, errors: 0, non2xx: 0, statusCodes: { 200: responses }, xCache, serverCpuUs: 1_000_000 / requestsPerSecond }
}

type Overrides = {
  redis?: RoundResult[]
  memory?: RoundResult[]
  /** Merged into the first herd round only. */
  firstShelterRound?: Partial<ShelterRound>
  zipf?: Partial<BenchResults['zipf']>
  rss?: number
  hang?: Partial<BenchResults['redisTrouble']['hang']>
  outage?: Partial<BenchResults['redisTrouble']['outage']>
}

function results (overrides: Overrides): BenchResults {
  return {
    machine: { date: '2026-01-01T00:00:00Z', commit: 'abc1234', cores: 2, cpuModel: 'CPU', node: 'v20', platform: 'linux x64', loadAverage: [1, 1, 1] },
    settings: { upstreamLatencyMs: 50, connections: 50, rounds: 3, roundSeconds: 5, logLevel: 'info', warmedUsernames: 100, buildTypeErrors: 0 },
    hit: {
      bare: summarize('bare Fastify', [round(20_000, 5, { none: 1_000 }), round(20_000, 5, { none: 1_000 }), round(20_000, 5, { none: 1_000 })]),
      floor: summarize('floor', [round(10_000, 10, { none: 1_000 }), round(10_000, 10, { none: 1_000 }), round(10_000, 10, { none: 1_000 })]),
      redis: summarize('service, Redis', overrides.redis ?? [round(8_000, 15), round(8_100, 15), round(1_000, 99)]),
      memory: summarize('service, in-process', overrides.memory ?? [round(9_000, 10), round(9_100, 10), round(9_200, 10)])
    },
    shelter: {
      requests: 1_000,
      instances: 2,
      // Over their floors by 30, 15, 50, -10 and 50 ms: the median, 30, is the goal's boundary (the medians
      // of the rounds, 85 and 50, are 35 apart: the goal is on each herd against its own floor).
      rounds: [[85, 55], [60, 45], [100, 50], [50, 60], [90, 40]].map(([p50Ms = 0, floorP50Ms = 0], index) => ({
        upstreamCalls: 1,
        p50Ms,
        p99Ms: p50Ms + 20,
        statuses: { 200: 1_000 },
        xCache: { MISS: 1_000 },
        floorP50Ms,
        floorP99Ms: floorP50Ms + 10,
        ...(index === 0 && overrides.firstShelterRound)
      }))
    },
    zipf: { requests: 20_000, usernames: 10_000, exponent: 1.1, distinctRequested: 3_000, upstreamCalls: 3_000, usernamesCalledTwice: 0, tokenExchanges: 1, statuses: { 200: 20_000 }, seconds: 5, ...overrides.zipf },
    memory: { serviceRssBytes: overrides.rss ?? 150 * 1024 * 1024 },
    batch: {
      usernames: 50,
      pageViews: 100,
      singles: { requests: 50, p50Ms: 20, p99Ms: 40, bodyBytes: 20_000 },
      batch: { requests: 1, p50Ms: 4, p99Ms: 8, bodyBytes: 19_000, brotliBytes: 6_000 }
    },
    redisTrouble: {
      seconds: 5,
      usernames: 100,
      hang: { requests: 50_000, errors: 0, p50Ms: 99.9, p99Ms: 600, maxMs: 1_000, afterMaxMs: 999, ...overrides.hang },
      outage: { requests: 60_000, errors: 0, maxCallsPerUsername: 1, callsAfterReturn: 0, ...overrides.outage }
    }
  }
}

t.test('targets pass on the medians of the rounds, at their exact boundaries', async (t) => {
  const verdictList = verdicts(results({}))
  t.equal(verdictList.length, 9)
  t.ok(verdictList.every((verdict) => verdict.pass === true), JSON.stringify(verdictList))
  t.match(verdictList[0]?.measured, /^0\.80x$/, 'median of the rounds\' 8,000 / 10,000, one slow round ignored')
  t.match(verdictList[1]?.measured, /^1\.50x/, 'p99: median of the rounds\' 15 / 10')
  t.equal(verdictList[5]?.goal, '<= 30 ms')
  t.equal(verdictList[5]?.measured, '+30.0 ms (medians of the rounds: 85.0 ms vs 50.0 ms)', 'the median of the rounds\' differences')
})

t.test('each target misses just past its boundary', async (t) => {
  const bench = results({
    redis: [round(7_999, 15.01), round(7_999, 15.01), round(7_999, 15.01)],
    memory: [round(7_999, 15.01), round(7_999, 15.01), round(7_999, 15.01)],
    firstShelterRound: { upstreamCalls: 2, p50Ms: 85.01 },
    zipf: { upstreamCalls: 3_001, tokenExchanges: 2 },
    rss: 200 * 1024 * 1024,
    hang: { p50Ms: 100, afterMaxMs: 1_000 },
    outage: { maxCallsPerUsername: 2 }
  })
  t.ok(verdicts(bench).every((verdict) => verdict.pass === false), JSON.stringify(verdicts(bench)))
  t.ok(renderReport(bench).includes('| MISS |'))
  t.notOk(renderReport(bench).includes('| PASS |'))
})

t.test('a hit path with a non-HIT answer, an error or a failed waiter does not pass', async (t) => {
  const withMiss = results({ memory: [round(9_500, 10, { HIT: 999, MISS: 1 }), round(9_500, 10), round(9_500, 10)] })
  const memoryVerdict = verdicts(withMiss)[2]
  t.equal(memoryVerdict?.pass, false)
  t.match(memoryVerdict?.measured, /not every answer was a 200 HIT \(HIT: 2,999, MISS: 1/)
  const withError = results({ redis: [{ ...round(9_500, 10), errors: 1 }, round(9_500, 10), round(9_500, 10)] })
  t.equal(verdicts(withError)[0]?.pass, false)
  const shed = results({ redis: [{ ...round(9_500, 10, { HIT: 990, none: 10 }), non2xx: 10, statusCodes: { 200: 990, 503: 10 } }, round(9_500, 10), round(9_500, 10)] })
  t.equal(verdicts(shed)[0]?.pass, false)
  t.match(verdicts(shed)[0]?.measured, /non-2xx 10 \(503: 10\)/)
  t.match(renderReport(shed), /\| service, Redis \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| 0 \| 10 \(503: 10\) \|/)
  const failedWaiter = results({ firstShelterRound: { statuses: { 200: 999, 0: 1 } } })
  t.equal(verdicts(failedWaiter)[5]?.pass, false)
  t.match(verdicts(failedWaiter)[5]?.measured, /statuses 0: 1, 200: 4,999/)
  const failedZipf = results({ zipf: { statuses: { 200: 19_999, 502: 1 } } })
  t.equal(verdicts(failedZipf)[6]?.pass, false)
  const noProc = { ...results({}), memory: { serviceRssBytes: undefined } }
  t.equal(verdicts(noProc)[8]?.pass, undefined)
  t.ok(renderReport(noProc).includes('| n/a |'))
})

t.test('the report states the machine, the settings and every round', async (t) => {
  const text = renderReport(results({}))
  t.match(text, /2 cores \(CPU\) · Node v20/)
  t.match(text, /LOG_LEVEL=info/)
  t.match(text, /\| bare Fastify \| 20,000 \| 1\.67 ms \| 5\.00 ms \| 50\.0 µs \| 0 \| 0 \| none 100% \| 2\.00x \| 0\.50x \| 1\.00x \|/)
  t.match(text, /\| service, Redis \| 8,000 \| 5\.00 ms \| 15\.0 ms \| 125\.0 µs \| 0 \| 0 \| HIT 100% \| 0\.80x \| 1\.50x \| 0\.40x \|/)
  t.match(text, /\| 3 \| 20,000 \| 10,000 \| 1,000 \| 9,200 \|/, 'the third round of each target')
  t.match(text, '| upstream calls for it, per round | 1, 1, 1, 1, 1 |')
  t.match(text, '| over the floor | +30.0 ms | +15.0 ms | +50.0 ms | -10.0 ms | +50.0 ms |', 'every herd round beside its floor')
  t.match(renderReport(results({ firstShelterRound: { p50Ms: 55.001 } })), '| over the floor | 0.00 ms | +15.0 ms |', 'no sign on what rounds to zero')
  t.match(text, '| what the service adds over that floor at the median (median of the rounds\' differences) | +30.0 ms |')
})

t.test('the report sets a list page\'s batch beside its single requests', async (t) => {
  const report = renderReport(results({}))
  t.match(report, '| one `GET /profiles` batch | 1 | 4.00 ms | 8.00 ms | 19,000 (brotli: 6,000) |')
  t.match(report, '| single `GET /profile/:username` over 6 connections | 50 | 20.0 ms | 40.0 ms | 20,000 |')
  t.match(report, '| batch vs singles, p50 | | 0.20x | | |')
})

t.test('Redis trouble targets pass at their boundaries and miss just past them', async (t) => {
  t.ok(redisTroubleVerdicts(results({})).every((verdict) => verdict.pass === true), JSON.stringify(redisTroubleVerdicts(results({}))))
  const missed = [
    results({ hang: { p50Ms: 100 } }),
    results({ hang: { errors: 1 } }),
    results({ hang: { afterMaxMs: 1_000 } }),
    results({ outage: { maxCallsPerUsername: 2 } }),
    results({ outage: { errors: 1 } })
  ]
  t.same(missed.map((bench) => redisTroubleVerdicts(bench).filter((verdict) => verdict.pass === false).length), [1, 1, 1, 1, 1])
  t.match(renderReport(results({})), /\| upstream calls per warmed username during the outage, at most \| 1 \|/)
})
