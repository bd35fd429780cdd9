import type { RoundResult } from './load.ts'
import { median } from './stats.ts'

/**
 * When a round measures the server and not the load generator or the neighbours: wrk used at most 70% of a core
 * (so it had room to send more), and the server's main thread, the one every request runs on, was busy at least
 * 90% of the round (so it answered as fast as it could, not as fast as it was asked or as the machine let it).
 */
export const VALIDITY = { maxGeneratorCpu: 0.7, minServerBusy: 0.9 } as const

/** A goal on the hit path is decided on at least this many rounds valid for both targets: one round is a coin toss on a shared machine. */
export const MIN_ROUNDS_TO_JUDGE = 3

/** Why a round does not count; empty when it does. A figure that could not be read (no /proc) invalidates it too. */
export function invalidReasons (round: Pick<RoundResult, 'generatorCpu' | 'serverBusy'>): string[] {
  const reasons: string[] = []
  if (!(round.generatorCpu <= VALIDITY.maxGeneratorCpu)) reasons.push(`wrk used ${percent(round.generatorCpu)} of a core (> ${percent(VALIDITY.maxGeneratorCpu)})`)
  if (!(round.serverBusy >= VALIDITY.minServerBusy)) reasons.push(`the server was ${percent(round.serverBusy)} busy (< ${percent(VALIDITY.minServerBusy)})`)
  return reasons
}

export function isValid (round: Pick<RoundResult, 'generatorCpu' | 'serverBusy'>): boolean {
  return invalidReasons(round).length === 0
}

/** A median of per-round ratios: over the rounds where both figures are valid, and over every round for comparison. */
export interface RatioMedian {
  /** NaN when no round was valid for both. */
  valid: number
  all: number
  /** Rounds valid for both sides, of `rounds`. */
  validRounds: number
  rounds: number
  /** The indexes of the rounds the ratio was taken over: the valid ones, or all of them when none was. */
  counted: number[]
}

/**
 * The median over rounds of `target`'s figure over `base`'s in the same round (the targets of one round share the
 * machine's load of that moment), counting only rounds in which both were valid.
 */
export function ratioMedian (target: RoundResult[], base: RoundResult[], figure: (round: RoundResult) => number): RatioMedian {
  const pairs = target.flatMap((round, index) => {
    const baseRound = base[index]
    return baseRound === undefined ? [] : [{ index, ratio: figure(round) / figure(baseRound), valid: isValid(round) && isValid(baseRound) }]
  })
  const valid = pairs.filter((pair) => pair.valid)
  return {
    valid: median(valid.map((pair) => pair.ratio)),
    all: median(pairs.map((pair) => pair.ratio)),
    validRounds: valid.length,
    rounds: pairs.length,
    counted: (valid.length > 0 ? valid : pairs).map((pair) => pair.index)
  }
}

/** One target's rounds, and their medians: over its valid rounds, or over all of them when none was valid. */
export interface TargetSummary {
  label: string
  rounds: RoundResult[]
  validRounds: number
  /** The medians below are over every round: none was valid. */
  fromInvalidRounds: boolean
  requestsPerSecond: number
  p50Ms: number
  p99Ms: number
  serverCpuUs: number
  serverBusy: number
  generatorCpu: number
  othersCpu: number
  /** Summed over every round, valid or not. */
  responses: number
  errors: number
  non2xx: number
  /** Summed over every round; undefined for a target without metrics (bare Fastify). */
  statuses?: Record<string, number>
  xCache?: Record<string, number>
}

export function summarize (label: string, rounds: RoundResult[]): TargetSummary {
  const valid = rounds.filter(isValid)
  const counted = valid.length > 0 ? valid : rounds
  const middle = (pick: (round: RoundResult) => number): number => median(counted.map(pick))
  const sum = (pick: (round: RoundResult) => number): number => rounds.reduce((total, round) => total + pick(round), 0)
  const served = rounds.flatMap((round) => round.served === undefined ? [] : [round.served])
  return {
    label,
    rounds,
    validRounds: valid.length,
    fromInvalidRounds: valid.length === 0,
    requestsPerSecond: middle((round) => round.requestsPerSecond),
    p50Ms: middle((round) => round.p50Ms),
    p99Ms: middle((round) => round.p99Ms),
    serverCpuUs: middle((round) => round.serverCpuUs),
    serverBusy: middle((round) => round.serverBusy),
    generatorCpu: middle((round) => round.generatorCpu),
    othersCpu: middle((round) => round.othersCpu),
    responses: sum((round) => round.responses),
    errors: sum((round) => round.errors),
    non2xx: sum((round) => round.non2xx),
    ...(served.length === rounds.length && served.length > 0 && {
      statuses: totalCounts(served.map((counts) => counts.statuses)),
      xCache: totalCounts(served.map((counts) => counts.xCache))
    })
  }
}

/** Counts by value (status, X-Cache) added up. */
export function totalCounts (counts: Array<Record<string, number>>): Record<string, number> {
  const total: Record<string, number> = {}
  for (const one of counts) for (const [value, n] of Object.entries(one)) total[value] = (total[value] ?? 0) + n
  return total
}

/**
 * Every answer of a target was a 200 HIT: no error, no status of 400 or more, and, where the service counted its
 * answers, nothing but 200 and HIT (it counts a few more than wrk: those in flight when wrk stopped).
 */
export function cleanHits (target: TargetSummary): boolean {
  if (target.errors > 0 || target.non2xx > 0) return false
  if (target.statuses === undefined || target.xCache === undefined) return true
  const onlyKey = (counts: Record<string, number>, key: string): boolean =>
    Object.entries(counts).every(([value, n]) => value === key || n === 0) && (counts[key] ?? 0) >= target.responses
  return onlyKey(target.statuses, '200') && onlyKey(target.xCache, 'HIT')
}

function percent (share: number): string {
  return Number.isNaN(share) ? 'n/a' : `${Math.round(share * 100)}%`
}
