import type { RoundResult } from './load.ts'
import { cleanHits, MIN_ROUNDS_TO_JUDGE, ratioMedian, totalCounts, type TargetSummary } from './rounds.ts'
import { count, fromClients, hitCaveat, mib, ms, ratioText, signedMs, statuses, us } from './format.ts'
import type { BenchResults, ShelterRound } from './results.ts'
import { median } from './stats.ts'

/** The issues' targets (6, 10, 13 and 23), in one place. The hit path is measured against the same-bytes floor. */
export const GOALS = {
  hitMinThroughputVsFloor: 0.8,
  hitMaxCpuVsFloor: 1.25,
  hitMaxP99VsFloor: 1.5,
  shelterUpstreamCalls: 1,
  shelterMedianOverFloorMs: 30,
  zipfTokenExchanges: 1,
  maxRssBytes: 200 * 1024 * 1024,
  // Issue 10: Redis hung or gone.
  troubleMedianMs: 100,
  troubleAfterMaxMs: 1_000,
  outageCallsPerUsername: 1
} as const

export interface Verdict {
  target: string
  goal: string
  measured: string
  /** undefined: could not be measured here (no /proc, or no valid round). */
  pass: boolean | undefined
}

/** Every target of the issues against this run's figures, for the phases that ran. */
export function verdicts (results: BenchResults): Verdict[] {
  return [...hitVerdicts(results), ...shelterVerdicts(results), ...zipfVerdicts(results), ...scanVerdicts(results)]
}

/**
 * The hit path against the floor, both stores: medians of in-round ratios over the rounds valid for both. A target
 * only passes if every answer was a 200 HIT; with fewer than MIN_ROUNDS_TO_JUDGE valid rounds, nothing is decided (n/a).
 */
export function hitVerdicts ({ hit }: BenchResults): Verdict[] {
  if (hit === undefined) return []
  const floor = hit.floor
  const one = (target: TargetSummary, name: string, maximum: number | undefined, minimum: number | undefined, figure: (round: RoundResult) => number, unit?: (value: number) => string): Verdict => {
    const ratio = ratioMedian(target.rounds, floor.rounds, figure)
    // The figures themselves, over the same rounds as the ratio.
    const over = (rounds: RoundResult[]): number => median(ratio.counted.flatMap((index) => rounds[index] === undefined ? [] : [figure(rounds[index])]))
    const value = ratio.valid
    return {
      target: `Hit path, ${target.label}: ${name}`,
      goal: maximum === undefined ? `>= ${minimum}x floor` : `<= ${maximum}x floor`,
      measured: `${ratioText(ratio)}${ratio.validRounds > 0 && ratio.validRounds < MIN_ROUNDS_TO_JUDGE ? `, too few to judge (${MIN_ROUNDS_TO_JUDGE} needed)` : ''}${unit === undefined ? '' : ` (${unit(over(target.rounds))} vs ${unit(over(floor.rounds))})`}${hitCaveat(target)}`,
      pass: ratio.validRounds < MIN_ROUNDS_TO_JUDGE ? undefined : (maximum === undefined || value <= maximum) && (minimum === undefined || value >= minimum) && cleanHits(target)
    }
  }
  return [hit.redis, hit.memory].flatMap((target) => [
    one(target, 'req/s', undefined, GOALS.hitMinThroughputVsFloor, (round) => round.requestsPerSecond),
    one(target, 'server CPU per response', GOALS.hitMaxCpuVsFloor, undefined, (round) => round.serverCpuUs, us),
    one(target, 'p99 latency', GOALS.hitMaxP99VsFloor, undefined, (round) => round.p99Ms, ms)
  ])
}

function shelterVerdicts ({ shelter }: BenchResults): Verdict[] {
  if (shelter === undefined) return []
  const herd = herdSummary(shelter)
  return [
    {
      target: `Shelter: upstream calls, ${count(shelter.requests)} concurrent cold requests ${fromClients(shelter.clients)} over ${shelter.instances} instances, each of ${shelter.rounds.length} rounds`,
      goal: `${GOALS.shelterUpstreamCalls}`,
      measured: shelter.rounds.map((round) => round.upstreamCalls).join(', '),
      pass: shelter.rounds.length > 0 && shelter.rounds.every((round) => round.upstreamCalls === GOALS.shelterUpstreamCalls)
    },
    {
      target: `Shelter: median waiter latency over its floor (median of the rounds), ${fromClients(shelter.clients)}`,
      goal: `<= ${GOALS.shelterMedianOverFloorMs} ms`,
      measured: `${signedMs(herd.overFloorMs)} (medians of the rounds: ${ms(herd.p50Ms)} vs ${ms(herd.floorP50Ms)})${herd.allAnswered ? '' : `, statuses ${statuses(herd.statuses)}`}`,
      pass: herd.overFloorMs <= GOALS.shelterMedianOverFloorMs && herd.allAnswered
    }
  ]
}

function zipfVerdicts ({ zipf }: BenchResults): Verdict[] {
  if (zipf === undefined) return []
  const zipfAllOk = (zipf.statuses['200'] ?? 0) === zipf.requests
  return [
    {
      target: `Zipf mix: upstream calls vs distinct usernames (${count(zipf.requests)} requests)`,
      goal: 'equal',
      measured: `${count(zipf.upstreamCalls)} vs ${count(zipf.distinctRequested)}${zipfAllOk ? '' : `, statuses ${statuses(zipf.statuses)}`}`,
      pass: zipf.upstreamCalls === zipf.distinctRequested && zipfAllOk
    },
    {
      target: 'Zipf mix: token exchanges',
      goal: `${GOALS.zipfTokenExchanges}`,
      measured: `${zipf.tokenExchanges}`,
      pass: zipf.tokenExchanges === GOALS.zipfTokenExchanges
    },
    {
      target: 'Memory: RSS after the Zipf run, in-process store',
      goal: `< ${mib(GOALS.maxRssBytes)}`,
      measured: zipf.serviceRssBytes === undefined ? 'n/a (no /proc)' : mib(zipf.serviceRssBytes),
      pass: zipf.serviceRssBytes === undefined ? undefined : zipf.serviceRssBytes < GOALS.maxRssBytes
    }
  ]
}

/** Issue 23: the scan's peak RSS under each configuration's ceiling, and every request answered. */
export function scanVerdicts ({ scan }: BenchResults): Verdict[] {
  return (scan ?? []).map((result) => {
    const allOk = (result.statuses['200'] ?? 0) === result.usernames
    return {
      target: `Memory: peak RSS over a scan of ${count(result.usernames)} usernames, ${result.label}`,
      goal: `< ${mib(result.goal.maxPeakRssBytes)} (${result.goal.reason})`,
      measured: `${mib(result.peak.rssBytes)}${allOk ? '' : `, statuses ${statuses(result.statuses)}`}`,
      pass: result.peak.rssBytes < result.goal.maxPeakRssBytes && allOk
    }
  })
}

/** Issue 10's targets: Redis hung or gone costs callers nothing beyond the first detection, and the upstream nothing. */
export function redisTroubleVerdicts ({ redisTrouble }: BenchResults): Verdict[] {
  if (redisTrouble === undefined) return []
  const { seconds, hang, outage } = redisTrouble
  return [
    {
      target: `Redis hung ${seconds} s under load: errors, median latency`,
      goal: `0, < ${ms(GOALS.troubleMedianMs)}`,
      measured: `${hang.errors}, ${ms(hang.p50Ms)} (p99 ${ms(hang.p99Ms)}, max ${ms(hang.maxMs)})`,
      pass: hang.errors === 0 && hang.p50Ms < GOALS.troubleMedianMs
    },
    {
      target: 'Redis hung: slowest request after SIGCONT',
      goal: `< ${ms(GOALS.troubleAfterMaxMs)}`,
      measured: ms(hang.afterMaxMs),
      pass: hang.afterMaxMs < GOALS.troubleAfterMaxMs
    },
    {
      target: `Redis gone ${seconds} s: errors, upstream calls per warmed username`,
      goal: `0, <= ${GOALS.outageCallsPerUsername}`,
      measured: `${outage.errors}, ${outage.maxCallsPerUsername} at most (${count(outage.callsAfterReturn)} calls in the 2 s after the restart)`,
      pass: outage.errors === 0 && outage.maxCallsPerUsername <= GOALS.outageCallsPerUsername
    }
  ]
}

/** The herd's rounds in figures: medians of the rounds, and every answer counted. */
export interface HerdSummary extends Omit<ShelterRound, 'upstreamCalls'> {
  /** The median of the rounds' differences, each herd against its own floor. */
  overFloorMs: number
  /** Every request of every round answered 200. */
  allAnswered: boolean
}

export function herdSummary ({ rounds, requests }: NonNullable<BenchResults['shelter']>): HerdSummary {
  const statusCounts = totalCounts(rounds.map((round) => round.statuses))
  return {
    p50Ms: median(rounds.map((round) => round.p50Ms)),
    p99Ms: median(rounds.map((round) => round.p99Ms)),
    floorP50Ms: median(rounds.map((round) => round.floorP50Ms)),
    floorP99Ms: median(rounds.map((round) => round.floorP99Ms)),
    overFloorMs: median(rounds.map((round) => round.p50Ms - round.floorP50Ms)),
    statuses: statusCounts,
    xCache: totalCounts(rounds.map((round) => round.xCache)),
    allAnswered: rounds.length > 0 && statusCounts['200'] === requests * rounds.length
  }
}
