import t from 'tap'
import type { RoundResult } from '../load.ts'
import { cleanHits, invalidReasons, isValid, ratioMedian, summarize, VALIDITY } from '../rounds.ts'

// Which rounds count, and the medians of in-round ratios over them: pure arithmetic, no timing.

function round (requestsPerSecond: number, overrides: Partial<RoundResult> = {}): RoundResult {
  return {
    requestsPerSecond,
    p50Ms: 1,
    p99Ms: 2,
    responses: requestsPerSecond * 5,
    errors: 0,
    non2xx: 0,
    serverCpuUs: 1_000_000 / requestsPerSecond,
    serverBusy: 0.95,
    generatorCpu: 0.5,
    othersCpu: 0.1,
    ...overrides
  }
}

t.test('a round is invalid when wrk used more than 70% of a core or the server was less than 90% busy', async (t) => {
  t.same(VALIDITY, { maxGeneratorCpu: 0.7, minServerBusy: 0.9 })
  t.ok(isValid({ generatorCpu: 0.7, serverBusy: 0.9 }), 'both at their boundary: valid')
  t.same(invalidReasons({ generatorCpu: 0.7, serverBusy: 0.9 }), [])
  t.same(invalidReasons({ generatorCpu: 0.71, serverBusy: 0.9 }), ['wrk used 71% of a core (> 70%)'])
  t.same(invalidReasons({ generatorCpu: 0.5, serverBusy: 0.89 }), ['the server was 89% busy (< 90%)'])
  t.same(invalidReasons({ generatorCpu: 0.95, serverBusy: 0.6 }), ['wrk used 95% of a core (> 70%)', 'the server was 60% busy (< 90%)'])
  t.equal(invalidReasons({ generatorCpu: Number.NaN, serverBusy: Number.NaN }).length, 2, 'a figure that could not be read does not count as valid')
  t.ok(isValid({ generatorCpu: 0.2, serverBusy: 1.02 }), 'a tick of rounding above one core is still busy')
})

t.test('ratio medians take the rounds valid for both sides, and say how many', async (t) => {
  const base = [round(10_000), round(10_000), round(10_000, { serverBusy: 0.5 }), round(10_000), round(10_000)]
  const target = [round(8_000), round(9_000, { generatorCpu: 0.8 }), round(1_000), round(7_000), round(6_000)]
  const ratio = ratioMedian(target, base, (one) => one.requestsPerSecond)
  t.equal(ratio.validRounds, 3, 'round 2 (the target\'s wrk) and round 3 (the base\'s server) are out')
  t.equal(ratio.rounds, 5)
  t.equal(ratio.valid, 0.7, 'median of 0.8, 0.7 and 0.6')
  t.equal(ratio.all, 0.7, 'median of all five: 0.8, 0.9, 0.1, 0.7, 0.6')
  const cpu = ratioMedian(target, base, (one) => one.serverCpuUs)
  t.equal(cpu.valid.toFixed(4), (10_000 / 7_000).toFixed(4), 'CPU per response: the same rounds, the inverse ratios')
  const none = ratioMedian([round(8_000, { serverBusy: 0.1 })], [round(10_000)], (one) => one.requestsPerSecond)
  t.ok(Number.isNaN(none.valid))
  t.equal(none.all, 0.8)
  t.equal(none.validRounds, 0)
  t.equal(ratioMedian([round(1), round(2)], [round(1)], (one) => one.requestsPerSecond).rounds, 1, 'a round without its base is no pair')
})

t.test('a summary takes medians over valid rounds, or over all of them, marked, when none was', async (t) => {
  const mixed = summarize('x', [round(100), round(300, { generatorCpu: 0.9 }), round(200), round(400)])
  t.equal(mixed.validRounds, 3)
  t.equal(mixed.fromInvalidRounds, false)
  t.equal(mixed.requestsPerSecond, 200, 'median of 100, 200 and 400; the invalid 300 left out')
  t.equal(mixed.responses, 5_000, 'counts add up every round')
  const invalid = summarize('y', [round(100, { serverBusy: 0.3 }), round(300, { serverBusy: 0.3 })])
  t.equal(invalid.fromInvalidRounds, true)
  t.equal(invalid.requestsPerSecond, 200)
})

t.test('clean hits: no error, no status >= 400, and, where the service counted, only 200 and HIT', async (t) => {
  const served = (statuses: Record<string, number>, xCache: Record<string, number>): RoundResult => round(100, { served: { statuses, xCache } })
  t.ok(cleanHits(summarize('bare', [round(100)])), 'bare Fastify: wrk\'s counts only')
  t.ok(cleanHits(summarize('s', [served({ 200: 510 }, { HIT: 510 })])), 'the service counts those in flight when wrk stopped too')
  t.notOk(cleanHits(summarize('s', [served({ 200: 500 }, { HIT: 499, MISS: 1 })])))
  t.notOk(cleanHits(summarize('s', [served({ 200: 500, 304: 1 }, { HIT: 501 })])))
  t.notOk(cleanHits(summarize('s', [served({ 200: 400 }, { HIT: 400 })])), 'fewer counted than wrk saw: not the route measured')
  t.notOk(cleanHits(summarize('s', [round(100, { errors: 1 })])))
  t.notOk(cleanHits(summarize('s', [round(100, { non2xx: 1 })])))
  t.equal(summarize('s', [served({ 200: 1 }, { HIT: 1 }), round(100)]).xCache, undefined, 'a round without counts leaves the target without them')
})
