import type { RoundResult } from './load.ts'
import { median } from './stats.ts'

/** The issues' targets (6, 10 and 13), in one place. The hit path is measured against the same-bytes floor. */
export const GOALS = {
  hitMinThroughputVsFloor: 0.8,
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

/** One target's rounds, and their medians: the figures the table shows. */
export interface TargetSummary extends RoundResult {
  label: string
  rounds: RoundResult[]
}

export function summarize (label: string, rounds: RoundResult[]): TargetSummary {
  const sum = (pick: (round: RoundResult) => number): number => rounds.reduce((total, round) => total + pick(round), 0)
  return {
    label,
    rounds,
    requestsPerSecond: median(rounds.map((round) => round.requestsPerSecond)),
    p50Ms: median(rounds.map((round) => round.p50Ms)),
    p99Ms: median(rounds.map((round) => round.p99Ms)),
    serverCpuUs: median(rounds.map((round) => round.serverCpuUs)),
    errors: sum((round) => round.errors),
    non2xx: sum((round) => round.non2xx),
    responses: sum((round) => round.responses),
    statusCodes: totalCounts(rounds, (round) => round.statusCodes),
    xCache: totalCounts(rounds, (round) => round.xCache)
  }
}

/** One herd, and its floor: the same burst against as many bare Fastify instances, holding each request for the upstream latency. */
export interface ShelterRound {
  upstreamCalls: number
  p50Ms: number
  p99Ms: number
  statuses: Record<string, number>
  xCache: Record<string, number>
  floorP50Ms: number
  floorP99Ms: number
}

export interface BenchResults {
  machine: { date: string, commit: string, cores: number, cpuModel: string, node: string, platform: string, loadAverage: number[] }
  settings: {
    upstreamLatencyMs: number
    connections: number
    rounds: number
    roundSeconds: number
    logLevel: string
    warmedUsernames: number
    /** Type errors tsc reported while building what was measured (0 for a clean tree). */
    buildTypeErrors: number
  }
  /** bare: a constant object; floor: bare Fastify sending exactly a hit's headers and bytes. */
  hit: { bare: TargetSummary, floor: TargetSummary, redis: TargetSummary, memory: TargetSummary }
  /** Each round: a herd on instances started for it, and its floor (see shelterRounds). */
  shelter: {
    requests: number
    instances: number
    rounds: ShelterRound[]
  }
  zipf: {
    requests: number
    usernames: number
    exponent: number
    distinctRequested: number
    upstreamCalls: number
    usernamesCalledTwice: number
    tokenExchanges: number
    statuses: Record<string, number>
    seconds: number
  }
  memory: { serviceRssBytes: number | undefined }
  /** A list page of warm members: single requests against one batch request. */
  batch: {
    usernames: number
    pageViews: number
    singles: { requests: number, p50Ms: number, p99Ms: number, bodyBytes: number }
    batch: { requests: number, p50Ms: number, p99Ms: number, bodyBytes: number, brotliBytes: number }
  }
  /** One instance on a Redis of its own: hung (SIGSTOP) for `seconds` under load, then killed for `seconds`. */
  redisTrouble: {
    seconds: number
    usernames: number
    /** Requests in flight at some moment of the hang; `afterMaxMs`: the slowest that started after SIGCONT. */
    hang: { requests: number, errors: number, p50Ms: number, p99Ms: number, maxMs: number, afterMaxMs: number }
    /** Requests during the outage; upstream calls per (warmed) username meanwhile, and in the 2 s after the restart. */
    outage: { requests: number, errors: number, maxCallsPerUsername: number, callsAfterReturn: number }
  }
}

export interface Verdict {
  target: string
  goal: string
  measured: string
  /** undefined: could not be measured here (e.g. no /proc). */
  pass: boolean | undefined
}

/** Every target of the issue against this run's figures. A hit path only counts if every answer was a 200 HIT. */
export function verdicts (results: BenchResults): Verdict[] {
  const { hit, shelter, zipf, memory } = results
  const herd = herdSummary(shelter)
  const zipfAllOk = (zipf.statuses['200'] ?? 0) === zipf.requests
  const hitVerdicts = (target: TargetSummary): Verdict[] => {
    const throughput = roundRatio(target, hit.floor, (round) => round.requestsPerSecond)
    const p99 = roundRatio(target, hit.floor, (round) => round.p99Ms)
    return [
      {
        target: `Hit path, ${target.label}: throughput`,
        goal: `>= ${GOALS.hitMinThroughputVsFloor}x floor`,
        measured: `${times(throughput)}${hitCaveat(target)}`,
        pass: throughput >= GOALS.hitMinThroughputVsFloor && cleanHits(target)
      },
      {
        target: `Hit path, ${target.label}: p99 latency`,
        goal: `<= ${GOALS.hitMaxP99VsFloor}x floor`,
        measured: `${times(p99)} (${ms(target.p99Ms)} vs ${ms(hit.floor.p99Ms)})${hitCaveat(target)}`,
        pass: p99 <= GOALS.hitMaxP99VsFloor && cleanHits(target)
      }
    ]
  }
  return [
    ...hitVerdicts(hit.redis),
    ...hitVerdicts(hit.memory),
    {
      target: `Shelter: upstream calls, ${count(shelter.requests)} concurrent cold requests over ${shelter.instances} instances, each of ${shelter.rounds.length} rounds`,
      goal: `${GOALS.shelterUpstreamCalls}`,
      measured: shelter.rounds.map((round) => round.upstreamCalls).join(', '),
      pass: shelter.rounds.length > 0 && shelter.rounds.every((round) => round.upstreamCalls === GOALS.shelterUpstreamCalls)
    },
    {
      target: 'Shelter: median waiter latency over its floor (median of the rounds)',
      goal: `<= ${GOALS.shelterMedianOverFloorMs} ms`,
      measured: `${signedMs(herd.overFloorMs)} (medians of the rounds: ${ms(herd.p50Ms)} vs ${ms(herd.floorP50Ms)})${herd.allAnswered ? '' : `, statuses ${statuses(herd.statuses)}`}`,
      pass: herd.overFloorMs <= GOALS.shelterMedianOverFloorMs && herd.allAnswered
    },
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
      measured: memory.serviceRssBytes === undefined ? 'n/a (no /proc)' : mib(memory.serviceRssBytes),
      pass: memory.serviceRssBytes === undefined ? undefined : memory.serviceRssBytes < GOALS.maxRssBytes
    }
  ]
}

/** Issue 10's targets: Redis hung or gone costs callers nothing beyond the first detection, and the upstream nothing. */
export function redisTroubleVerdicts ({ redisTrouble: { seconds, hang, outage } }: BenchResults): Verdict[] {
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

export function renderReport (results: BenchResults): string {
  const { machine, settings, hit, shelter, zipf, memory, batch, redisTrouble: trouble } = results
  const targets = [hit.bare, hit.floor, hit.redis, hit.memory]
  const herd = herdSummary(shelter)
  const lines = [
    '# Benchmark: latest run',
    '',
    `${machine.date} · commit ${machine.commit} · ${machine.cores} cores (${machine.cpuModel}) · Node ${machine.node} · ${machine.platform}` +
      ` · load average at start ${machine.loadAverage.map((load) => load.toFixed(2)).join(' / ')}`,
    '',
    `Upstream simulator latency ${ms(settings.upstreamLatencyMs)}. Hit path: ${settings.rounds} rounds of ${settings.roundSeconds} s per target,` +
      ` ${settings.connections} connections, targets interleaved (${targets.map((target) => target.label).join(' → ')}, repeated),` +
      ` ${settings.warmedUsernames} warmed usernames on \`GET /profile/:username\`. The service is built and run as \`node dist/server.js\`` +
      ` at LOG_LEVEL=${settings.logLevel}${settings.buildTypeErrors === 0 ? '' : ` (built with ${settings.buildTypeErrors} type errors)`}.` +
      ' Load generator and servers share the same cores, and so do other jobs on a shared machine: compare ratios within one run, not figures across runs.',
    '',
    '## Hit path (medians over the rounds; ratios: median of the same round\'s ratios)',
    '',
    '| target | req/s | p50 | p99 | server CPU per response | errors | non-2xx | X-Cache | req/s vs floor | p99 vs floor | req/s vs bare |',
    '|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|',
    ...targets.map((target) => `| ${target.label} | ${count(Math.round(target.requestsPerSecond))} | ${ms(target.p50Ms)} | ${ms(target.p99Ms)} | ${us(target.serverCpuUs)}` +
      ` | ${target.errors} | ${nonSuccess(target)} | ${shares(target.xCache, target.responses)}` +
      ` | ${times(roundRatio(target, hit.floor, (round) => round.requestsPerSecond))} | ${times(roundRatio(target, hit.floor, (round) => round.p99Ms))}` +
      ` | ${times(roundRatio(target, hit.bare, (round) => round.requestsPerSecond))} |`),
    '',
    `| round | ${targets.map((target) => `${target.label} req/s`).join(' | ')} |`,
    `|---:|${targets.map(() => '---:').join('|')}|`,
    ...hit.bare.rounds.map((_round, index) =>
      `| ${index + 1} | ${targets.map((target) => count(Math.round(target.rounds[index]?.requestsPerSecond ?? Number.NaN))).join(' | ')} |`),
    '',
    '## Shelter and memory',
    '',
    '| measure | value |',
    '|---|---:|',
    `| concurrent requests for one cold username, over ${shelter.instances} instances sharing Redis, started for each of ${shelter.rounds.length} rounds | ${count(shelter.requests)} |`,
    `| upstream calls for it, per round | ${shelter.rounds.map((round) => round.upstreamCalls).join(', ')} |`,
    `| waiters' latency, p50 / p99 (medians of the rounds) | ${ms(herd.p50Ms)} / ${ms(herd.p99Ms)} |`,
    `| their statuses / X-Cache, all rounds | ${statuses(herd.statuses)} / ${statuses(herd.xCache)} |`,
    `| floor: the same burst against ${shelter.instances} fresh bare Fastify instances holding each request ${ms(settings.upstreamLatencyMs)}, p50 / p99` +
      ` | ${ms(herd.floorP50Ms)} / ${ms(herd.floorP99Ms)} |`,
    `| what the service adds over that floor at the median (median of the rounds' differences) | ${signedMs(herd.overFloorMs)} |`,
    `| Zipf mix (s = ${zipf.exponent}) over ${count(zipf.usernames)} usernames from cold, in-process store: requests | ${count(zipf.requests)} in ${zipf.seconds.toFixed(1)} s |`,
    `| distinct usernames requested / upstream calls | ${count(zipf.distinctRequested)} / ${count(zipf.upstreamCalls)} |`,
    `| usernames the upstream was asked for more than once | ${zipf.usernamesCalledTwice} |`,
    `| token exchanges during the mix / statuses | ${zipf.tokenExchanges} / ${statuses(zipf.statuses)} |`,
    `| RSS of the service (in-process store) after the mix | ${memory.serviceRssBytes === undefined ? 'n/a' : mib(memory.serviceRssBytes)} |`,
    '',
    `| herd round | ${shelter.rounds.map((_round, index) => index + 1).join(' | ')} |`,
    `|---|${shelter.rounds.map(() => '---:').join('|')}|`,
    `| waiters' p50 | ${shelter.rounds.map((round) => ms(round.p50Ms)).join(' | ')} |`,
    `| floor's p50 | ${shelter.rounds.map((round) => ms(round.floorP50Ms)).join(' | ')} |`,
    `| over the floor | ${shelter.rounds.map((round) => signedMs(round.p50Ms - round.floorP50Ms)).join(' | ')} |`,
    '',
    `## A list page: ${batch.usernames} warm usernames, ${batch.pageViews} page views (in-process store)`,
    '',
    '| page view as | requests | p50 | p99 | body bytes |',
    '|---|---:|---:|---:|---:|',
    `| single \`GET /profile/:username\` over 6 connections | ${batch.singles.requests} | ${ms(batch.singles.p50Ms)} | ${ms(batch.singles.p99Ms)}` +
      ` | ${count(batch.singles.bodyBytes)} |`,
    `| one \`GET /profiles\` batch | ${batch.batch.requests} | ${ms(batch.batch.p50Ms)} | ${ms(batch.batch.p99Ms)}` +
      ` | ${count(batch.batch.bodyBytes)} (brotli: ${count(batch.batch.brotliBytes)}) |`,
    `| batch vs singles, p50 | | ${times(batch.batch.p50Ms / batch.singles.p50Ms)} | | |`,
    '',
    `## Redis trouble (one instance, its own redis-server, ${count(trouble.usernames)} warmed usernames)`,
    '',
    '| measure | value |',
    '|---|---:|',
    `| hung (SIGSTOP) ${trouble.seconds} s under load, 1 request in 10 for a new username: requests in flight / errors | ${count(trouble.hang.requests)} / ${trouble.hang.errors} |`,
    `| latency of the requests in flight during the hang, p50 / p99 / max | ${ms(trouble.hang.p50Ms)} / ${ms(trouble.hang.p99Ms)} / ${ms(trouble.hang.maxMs)} |`,
    `| slowest request after SIGCONT | ${ms(trouble.hang.afterMaxMs)} |`,
    `| killed (SIGKILL) ${trouble.seconds} s under load: requests / errors | ${count(trouble.outage.requests)} / ${trouble.outage.errors} |`,
    `| upstream calls per warmed username during the outage, at most | ${trouble.outage.maxCallsPerUsername} |`,
    `| upstream calls in the 2 s after the restart | ${count(trouble.outage.callsAfterReturn)} |`,
    '',
    '## Targets (issues 6, 10 and 13)',
    '',
    '| target | goal | measured | result |',
    '|---|---|---|---|',
    ...[...verdicts(results), ...redisTroubleVerdicts(results)].map((verdict) =>
      `| ${verdict.target} | ${verdict.goal} | ${verdict.measured} | ${verdict.pass === undefined ? 'n/a' : verdict.pass ? 'PASS' : 'MISS'} |`),
    ''
  ]
  return lines.join('\n')
}

/** The herd's rounds in figures: medians of the rounds, and every answer counted. */
interface HerdSummary extends Omit<ShelterRound, 'upstreamCalls'> {
  /** The median of the rounds' differences, each herd against its own floor. */
  overFloorMs: number
  /** Every request of every round answered 200. */
  allAnswered: boolean
}

function herdSummary ({ rounds, requests }: BenchResults['shelter']): HerdSummary {
  const statusCounts = totalCounts(rounds, (round) => round.statuses)
  return {
    p50Ms: median(rounds.map((round) => round.p50Ms)),
    p99Ms: median(rounds.map((round) => round.p99Ms)),
    floorP50Ms: median(rounds.map((round) => round.floorP50Ms)),
    floorP99Ms: median(rounds.map((round) => round.floorP99Ms)),
    overFloorMs: median(rounds.map((round) => round.p50Ms - round.floorP50Ms)),
    statuses: statusCounts,
    xCache: totalCounts(rounds, (round) => round.xCache),
    allAnswered: rounds.length > 0 && statusCounts['200'] === requests * rounds.length
  }
}

/** Counts by value (status, X-Cache) added up over the rounds. */
function totalCounts<Round> (rounds: Round[], pick: (round: Round) => Record<string, number>): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const round of rounds) for (const [value, n] of Object.entries(pick(round))) counts[value] = (counts[value] ?? 0) + n
  return counts
}

/** The median over the rounds of `target`'s figure over `base`'s in the same round: rounds share the machine's load of the moment. */
export function roundRatio (target: TargetSummary, base: TargetSummary, figure: (round: RoundResult) => number): number {
  return median(target.rounds.map((round, index) => {
    const baseRound = base.rounds[index]
    return baseRound === undefined ? Number.NaN : figure(round) / figure(baseRound)
  }))
}

function cleanHits (target: TargetSummary): boolean {
  return target.errors === 0 && target.non2xx === 0 && (target.xCache.HIT ?? 0) === target.responses
}

function hitCaveat (target: TargetSummary): string {
  return cleanHits(target) ? '' : `, but not every answer was a 200 HIT (${statuses(target.xCache)}; ${target.errors} errors; non-2xx ${nonSuccess(target)})`
}

/** The non-2xx count with its status codes, e.g. `12 (503: 12)`. */
function nonSuccess (target: TargetSummary): string {
  const codes = Object.fromEntries(Object.entries(target.statusCodes).filter(([code]) => !code.startsWith('2')))
  return target.non2xx === 0 ? '0' : `${count(target.non2xx)} (${statuses(codes)})`
}

function times (value: number): string {
  return `${value.toFixed(2)}x`
}

function ms (value: number): string {
  return `${value < 10 ? value.toFixed(2) : value.toFixed(1)} ms`
}

/** `+1.50 ms`, `-3.78 ms`; no sign on what rounds to zero. */
function signedMs (value: number): string {
  const magnitude = ms(Math.abs(value))
  return magnitude.startsWith('0.00 ') ? magnitude : `${value > 0 ? '+' : '-'}${magnitude}`
}

function us (value: number): string {
  return Number.isNaN(value) ? 'n/a' : `${value.toFixed(1)} µs`
}

function mib (bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`
}

function count (value: number): string {
  return Number.isNaN(value) ? 'n/a' : value.toLocaleString('en-US')
}

function statuses (counts: Record<string, number>): string {
  return Object.entries(counts).map(([value, n]) => `${value}: ${count(n)}`).join(', ') || 'none'
}

function shares (counts: Record<string, number>, total: number): string {
  return Object.entries(counts).map(([value, n]) => `${value} ${((n / total) * 100).toFixed(n === total ? 0 : 2)}%`).join(', ')
}
