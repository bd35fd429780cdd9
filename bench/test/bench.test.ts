import t from 'tap'
import type { RoundResult } from '../load.ts'
import { renderReport } from '../render.ts'
import { hitVerdicts, redisTroubleVerdicts, scanVerdicts, verdicts } from '../report.ts'
import type { BenchResults, FloorCheck, ScanResult, ShelterRound } from '../results.ts'
import { summarize } from '../rounds.ts'

// The benchmark's own arithmetic: if it is wrong, every figure in bench/results/latest.md is.

function round (requestsPerSecond: number, p99Ms: number, overrides: Partial<RoundResult> = {}): RoundResult {
  const responses = requestsPerSecond * 5
  return {
    requestsPerSecond,
    p50Ms: p99Ms / 3,
    p99Ms,
    responses,
    errors: 0,
    non2xx: 0,
    served: { statuses: { 200: responses + 3 }, xCache: { HIT: responses + 3 } },
    serverCpuUs: 1_000_000 / requestsPerSecond,
    serverBusy: 0.98,
    generatorCpu: 0.4,
    othersCpu: 0.1,
    ...overrides
  }
}

/** A bare target's round: no metrics of its own. */
function bareRound (requestsPerSecond: number, p99Ms: number, overrides: Partial<RoundResult> = {}): RoundResult {
  const { served: _served, ...rest } = round(requestsPerSecond, p99Ms, overrides)
  return rest
}

type Overrides = {
  floor?: RoundResult[]
  redis?: RoundResult[]
  memory?: RoundResult[]
  /** Merged into the first herd round only. */
  firstShelterRound?: Partial<ShelterRound>
  zipf?: Partial<NonNullable<BenchResults['zipf']>>
  hang?: Partial<NonNullable<BenchResults['redisTrouble']>['hang']>
  outage?: Partial<NonNullable<BenchResults['redisTrouble']>['outage']>
  scan?: ScanResult[]
}

const FLOOR_CHECK: FloorCheck = {
  hitHeaders: ['content-type', 'x-cache', 'x-request-id'],
  floorHeaders: ['content-type', 'x-cache', 'x-request-id'],
  differingValues: [],
  hitBytes: 1_200,
  floorBytes: 1_200,
  bodyBytes: 700,
  sameBody: true,
  freshRequestIds: true
}

function results (overrides: Overrides): BenchResults {
  return {
    machine: { date: '2026-01-01T00:00:00Z', commit: 'abc1234', cores: 2, cpuModel: 'CPU', node: 'v20', platform: 'linux x64', loadAverage: [1, 1, 1] },
    settings: { phases: ['zipf', 'herd', 'list', 'hit', 'trouble'], upstreamLatencyMs: 50, connections: 50, rounds: 3, roundSeconds: 5, logLevel: 'info', warmedUsernames: 100, buildTypeErrors: 0 },
    hit: {
      bare: summarize('bare Fastify', [bareRound(20_000, 5), bareRound(20_000, 5), bareRound(20_000, 5)]),
      floor: summarize('floor', overrides.floor ?? [bareRound(10_000, 10), bareRound(10_000, 10), bareRound(10_000, 10)]),
      // CPU per response: 125 µs against the floor's 100 (1.25x) in the two rounds that count.
      redis: summarize('service, Redis', overrides.redis ?? [round(8_000, 15), round(8_100, 15, { serverCpuUs: 125 }), round(1_000, 99)]),
      memory: summarize('service, in-process', overrides.memory ?? [round(9_000, 10), round(9_100, 10), round(9_200, 10)]),
      floorCheck: FLOOR_CHECK
    },
    shelter: {
      requests: 1_000,
      clients: 1,
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
    zipf: {
      requests: 20_000,
      usernames: 10_000,
      exponent: 1.1,
      distinctRequested: 3_000,
      upstreamCalls: 3_000,
      usernamesCalledTwice: 0,
      tokenExchanges: 1,
      statuses: { 200: 20_000 },
      seconds: 5,
      serviceRssBytes: 150 * 1024 * 1024,
      ...overrides.zipf
    },
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
    },
    ...(overrides.scan !== undefined && { scan: overrides.scan })
  }
}

t.test('targets pass on the medians of the rounds, at their exact boundaries', async (t) => {
  const verdictList = verdicts(results({}))
  t.equal(verdictList.length, 11)
  t.ok(verdictList.every((verdict) => verdict.pass === true), JSON.stringify(verdictList))
  t.match(verdictList[0]?.measured, /^0\.80x \(3 of 3 rounds valid\)$/, 'median of the rounds\' 8,000 / 10,000, one slow round ignored')
  t.match(verdictList[1]?.measured, /^1\.25x \(3 of 3 rounds valid\) \(125\.0 µs vs 100\.0 µs\)$/, 'CPU: median of the rounds\' 125 / 100')
  t.match(verdictList[2]?.measured, /^1\.50x/, 'p99: median of the rounds\' 15 / 10')
  t.equal(verdictList[7]?.goal, '<= 30 ms')
  t.equal(verdictList[7]?.measured, '+30.0 ms (medians of the rounds: 85.0 ms vs 50.0 ms)', 'the median of the rounds\' differences')
})

t.test('each target misses just past its boundary', async (t) => {
  const past = round(7_999, 15.01, { serverCpuUs: 125.1 })
  const bench = results({
    redis: [past, past, past],
    memory: [past, past, past],
    firstShelterRound: { upstreamCalls: 2, p50Ms: 85.01 },
    zipf: { upstreamCalls: 3_001, tokenExchanges: 2, serviceRssBytes: 200 * 1024 * 1024 },
    hang: { p50Ms: 100, afterMaxMs: 1_000 },
    outage: { maxCallsPerUsername: 2 }
  })
  t.ok(verdicts(bench).every((verdict) => verdict.pass === false), JSON.stringify(verdicts(bench)))
  t.ok(renderReport(bench).includes('| MISS |'))
  t.notOk(renderReport(bench).includes('| PASS |'))
})

t.test('the hit path is judged on valid rounds only, on three of them at least', async (t) => {
  // The service's one fast round came while wrk was saturated: it does not count, and the three valid ones miss.
  const floor4 = [bareRound(10_000, 10), bareRound(10_000, 10), bareRound(10_000, 10), bareRound(10_000, 10)]
  const redis = [round(9_900, 10, { generatorCpu: 0.71 }), round(7_000, 10), round(7_100, 10), round(7_200, 10)]
  const judged = hitVerdicts(results({ floor: floor4, redis }))
  t.equal(judged[0]?.pass, false)
  t.match(judged[0]?.measured, /^0\.71x \(3 of 4 rounds valid\)$/)
  // A round of the floor that is invalid removes that round from every ratio against the floor.
  const floor = [bareRound(10_000, 10), bareRound(10_000, 10, { serverBusy: 0.89 }), bareRound(10_000, 10)]
  const fewer = hitVerdicts(results({ floor }))[3]
  t.match(fewer?.measured, /^0\.91x \(2 of 3 rounds valid\), too few to judge \(3 needed\)$/)
  t.equal(fewer?.pass, undefined, 'two valid rounds decide nothing')
  const busy = [round(9_000, 10, { serverBusy: 0.5 }), round(9_000, 10, { serverBusy: 0.5 }), round(9_000, 10, { serverBusy: 0.5 })]
  const undecided = hitVerdicts(results({ memory: busy })).slice(3)
  t.same(undecided.map((verdict) => verdict.pass), [undefined, undefined, undefined])
  t.match(undecided[0]?.measured, /^n\/a \(0 of 3 valid; all rounds: 0\.90x\)/, 'what the invalid rounds said, for the record')
  const report = renderReport(results({ memory: busy }))
  t.match(report, /\| service, in-process \| 0 of 3 \| 9,000\* \|/, 'medians over every round, starred, when none was valid')
  t.match(report, /\| 1 \| service, in-process \| 9,000 \| [^|]+ \| [^|]+ \| [^|]+ \| 50% \| 40% \| 10% \| INVALID: the server was 50% busy \(< 90%\) \|/)
})

t.test('a hit path with a non-HIT answer, an error or a failed waiter does not pass', async (t) => {
  const withMiss = results({ memory: [round(9_500, 10, { served: { statuses: { 200: 50_000 }, xCache: { HIT: 49_999, MISS: 1 } } }), round(9_500, 10), round(9_500, 10)] })
  const memoryVerdict = verdicts(withMiss)[3]
  t.equal(memoryVerdict?.pass, false)
  t.match(memoryVerdict?.measured, /not every answer was a 200 HIT \(errors 0; status >= 400: 0; statuses 200: 145,006; X-Cache HIT: 145,005, MISS: 1\)/)
  const withError = results({ redis: [round(9_500, 10, { errors: 1 }), round(9_500, 10), round(9_500, 10)] })
  t.equal(verdicts(withError)[0]?.pass, false)
  const shed = results({ redis: [round(9_500, 10, { non2xx: 10, served: { statuses: { 200: 47_490, 503: 10 }, xCache: { HIT: 47_490 } } }), round(9_500, 10), round(9_500, 10)] })
  t.equal(verdicts(shed)[0]?.pass, false)
  t.match(verdicts(shed)[0]?.measured, /status >= 400: 10; statuses 200: 142,496, 503: 10/)
  t.match(renderReport(shed), /\| service, Redis \| 3 of 3 \| (?:[^|]+\|){7} 0 \| 10 \|/)
  const failedWaiter = results({ firstShelterRound: { statuses: { 200: 999, 0: 1 } } })
  t.equal(verdicts(failedWaiter)[7]?.pass, false)
  t.match(verdicts(failedWaiter)[7]?.measured, /statuses 0: 1, 200: 4,999/)
  const failedZipf = results({ zipf: { statuses: { 200: 19_999, 502: 1 } } })
  t.equal(verdicts(failedZipf)[8]?.pass, false)
  const noProc = results({ zipf: { serviceRssBytes: undefined } })
  t.equal(verdicts(noProc)[10]?.pass, undefined)
  t.ok(renderReport(noProc).includes('| n/a |'))
})

t.test('the report states the machine, the settings, the floor\'s bytes and every round', async (t) => {
  const text = renderReport(results({}))
  t.match(text, /2 cores \(CPU\) · Node v20/)
  t.match(text, /LOG_LEVEL=info/)
  t.match(text, '3 headers against 3 (the same names), 1,200 bytes against 1,200, a body of 700 bytes, the same bytes, a fresh request id per request from each')
  t.match(text, /\| bare Fastify \| 3 of 3 \| 20,000 \| 1\.67 ms \| 5\.00 ms \| 50\.0 µs \| 98% \| 40% \| 10% \| 0 \| 0 \| n\/a \| 2\.00x \(3\/3\) \| 0\.50x \(3\/3\) \| 0\.50x \(3\/3\) \| 1\.00x \| 1\.00x \|/)
  t.match(text, /\| service, Redis \| 3 of 3 \| 8,000 \| 5\.00 ms \| 15\.0 ms \| 125\.0 µs \| 98% \| 40% \| 10% \| 0 \| 0 \| HIT 85,509 \(wrk: 85,500\) \| 0\.80x \(3\/3\) \| 1\.25x \(3\/3\) \| 1\.50x \(3\/3\) \| 0\.40x \(3\/3\) \| 2\.50x \(3\/3\) \|/)
  t.match(text, /\| 3 \| service, in-process \| 9,200 \| 3\.33 ms \| 10\.0 ms \| 108\.7 µs \| 98% \| 40% \| 10% \| yes \|/, 'the third round of a target')
  t.match(text, '| upstream calls for it, per round | 1, 1, 1, 1, 1 |')
  t.match(text, '| over the floor | +30.0 ms | +15.0 ms | +50.0 ms | -10.0 ms | +50.0 ms |', 'every herd round beside its floor')
  t.match(renderReport(results({ firstShelterRound: { p50Ms: 55.001 } })), '| over the floor | 0.00 ms | +15.0 ms |', 'no sign on what rounds to zero')
  t.match(text, '| what the service adds over that floor at the median (median of the rounds\' differences) | +30.0 ms |')
  t.match(renderReport({ ...results({}), shelter: { ...results({}).shelter as NonNullable<BenchResults['shelter']>, clients: 1_000 } }), /rounds, from 1,000 client addresses \(X-Forwarded-For, TRUST_PROXY on\) \| 1,000 \|[^]*over its floor \(median of the rounds\), from 1,000 client addresses/, 'a herd from many addresses is named, in its verdict too')
  const differs = { ...results({}), hit: { ...results({}).hit as NonNullable<BenchResults['hit']>, floorCheck: { ...FLOOR_CHECK, floorHeaders: ['content-type', 'x-request-id'], sameBody: false, differingValues: ['keep-alive: timeout=72 / timeout=5'] } } }
  t.match(renderReport(differs), '2 headers against 3 (hit only: x-cache; floor only: none), 1,200 bytes against 1,200, a body of 700 bytes THAT DIFFERS')
  t.match(renderReport(differs), 'values that differ (hit / floor): keep-alive: timeout=72 / timeout=5.')
})

t.test('a run of some phases reports those only', async (t) => {
  const { machine, settings, hit } = results({})
  const text = renderReport({ machine, settings: { ...settings, phases: ['hit'] }, ...(hit !== undefined && { hit }) })
  t.match(text, /phases: hit/)
  t.match(text, '## Hit path')
  t.notMatch(text, 'Shelter')
  t.notMatch(text, 'Redis trouble')
  t.equal(verdicts({ machine, settings }).length, 0)
})

t.test('the scan is checked against each configuration\'s ceiling', async (t) => {
  const mib = 1024 * 1024
  const scan = (peak: number, statuses: Record<string, number> = { 200: 100_000 }): ScanResult => ({
    label: 'in-process store, the image\'s settings',
    nodeOptions: '--max-old-space-size=160',
    usernames: 100_000,
    concurrency: 64,
    seconds: 30,
    statuses,
    before: { rssBytes: 100 * mib, heapUsedBytes: 20 * mib },
    peak: { rssBytes: peak * mib, heapUsedBytes: 120 * mib },
    settled: { rssBytes: 200 * mib, heapUsedBytes: 70 * mib, afterSeconds: 5 },
    goal: { maxPeakRssBytes: 358.4 * mib, reason: '70% of the manifest\'s 512Mi' }
  })
  t.same(scanVerdicts(results({ scan: [scan(358.3)] })).map((verdict) => verdict.pass), [true])
  t.same(scanVerdicts(results({ scan: [scan(358.4), scan(300, { 200: 99_999, 503: 1 })] })).map((verdict) => verdict.pass), [false, false])
  const text = renderReport(results({ scan: [scan(300)] }))
  t.match(text, '| in-process store, the image\'s settings | `--max-old-space-size=160` | 100,000 | 64 | 30.0 s | 200: 100,000 | 100.0 MiB | 300.0 MiB | 200.0 MiB (after 5 s) | 20.0 MiB | 120.0 MiB | 70.0 MiB |')
  t.match(text, /\| Memory: peak RSS over a scan of 100,000 usernames, in-process store, the image's settings \| < 358\.4 MiB \(70% of the manifest's 512Mi\) \| 300\.0 MiB \| PASS \|/)
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
