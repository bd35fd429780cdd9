import { budgetSection, budgetVerdicts } from './budget-report.ts'
import { coherenceSection } from './coherence.ts'
import type { RoundResult } from './load.ts'
import { invalidReasons, ratioMedian, VALIDITY, type TargetSummary } from './rounds.ts'
import { count, fromClients, mib, missing, ms, pct, ratioText, servedCounts, signedMs, statuses, times, us } from './format.ts'
import { herdSummary, redisTroubleVerdicts, verdicts } from './report.ts'
import { missSection, missVerdicts } from './miss-report.ts'
import type { BenchResults, FloorCheck } from './results.ts'
import { scenariosSection, scenariosVerdicts } from './scenarios.ts'
import { soakSection, soakVerdicts } from './soak-report.ts'
import { tracingSection } from './tracing.ts'

// The report of one run (bench/results/latest.md): a section per phase that ran, then every target with PASS or MISS.

export function renderReport (results: BenchResults): string {
  const { machine, settings } = results
  const lines = [
    '# Benchmark: latest run',
    '',
    `${machine.date} · commit ${machine.commit} · ${machine.cores} cores (${machine.cpuModel}) · Node ${machine.node} · ${machine.platform}` +
      ` · load average at start ${machine.loadAverage.map((load) => load.toFixed(2)).join(' / ')} · phases: ${settings.phases.join(', ')}`,
    '',
    `Upstream simulator latency ${ms(settings.upstreamLatencyMs)}. The service is built and run as \`node dist/server.js\`` +
      ` at LOG_LEVEL=${settings.logLevel}${settings.buildTypeErrors === 0 ? '' : ` (built with ${settings.buildTypeErrors} type errors)`}.` +
      ' Load generator and servers share the same cores, and so do other jobs on a shared machine: compare ratios within one run, not figures across runs.',
    ...hitSection(results),
    ...missSection(results),
    ...shelterSection(results),
    ...batchSection(results),
    ...troubleSection(results),
    ...scanSection(results),
    ...budgetSection(results),
    ...coherenceSection(results),
    ...tracingSection(results),
    ...soakSection(results),
    ...scenariosSection(results),
    '',
    '## Targets (issues 6, 10, 13, 23, 25, 32 and 33)',
    '',
    '| target | goal | measured | result |',
    '|---|---|---|---|',
    ...[...verdicts(results), ...redisTroubleVerdicts(results), ...budgetVerdicts(results), ...missVerdicts(results), ...soakVerdicts(results), ...scenariosVerdicts(results)].map((verdict) =>
      `| ${verdict.target} | ${verdict.goal} | ${verdict.measured} | ${verdict.pass === undefined ? 'n/a' : verdict.pass ? 'PASS' : 'MISS'} |`),
    ''
  ]
  return lines.join('\n')
}

function hitSection ({ settings, hit }: BenchResults): string[] {
  if (hit === undefined) return []
  const targets = [hit.bare, hit.floor, hit.redis, hit.memory]
  const check = hit.floorCheck
  const ratio = (target: TargetSummary, base: TargetSummary, figure: (round: RoundResult) => number): string =>
    target === base ? '1.00x' : ratioText(ratioMedian(target.rounds, base.rounds, figure), true)
  return [
    '',
    `## Hit path: wrk, ${hit.bare.rounds.length} rounds of ${settings.roundSeconds} s per target, ${settings.connections} connections, interleaved`,
    '',
    `Targets in each round: ${targets.map((target) => target.label).join(' → ')}; ${settings.warmedUsernames} warmed usernames on` +
      ' `GET /profile/:username`, wrk (`-t1`) cycling through them. A round is **invalid** when wrk used more than' +
      ` ${pct(VALIDITY.maxGeneratorCpu)} of a core (it, not the server, may have set the pace) or the server's main thread was busy less` +
      ` than ${pct(VALIDITY.minServerBusy)} of the round (the machine did not let it run). Medians are over valid rounds (over all of them,` +
      ' marked *, when none was); ratios are medians of the same round\'s ratios over the rounds valid for both targets, with their count.' +
      ' Server CPU per response counts every thread of the server\'s process; its busy share counts the main thread only.' +
      ' Others\' CPU is the rest of the machine\'s busy time during the round (other processes, the hypervisor\'s steal), in cores: it is no rule, but a valid round beside a busy neighbour costs more CPU per response.' +
      ` Rounds past ${settings.rounds} are run (up to BENCH_MAX_ROUNDS) only while fewer than ${settings.rounds} were valid for every target.`,
    '',
    `The floor's answer against a hit's: ${check.floorHeaders.length} headers against ${check.hitHeaders.length}` +
      `${sameNames(check) ? ' (the same names)' : ` (hit only: ${missing(check.hitHeaders, check.floorHeaders).join(', ') || 'none'}; floor only: ${missing(check.floorHeaders, check.hitHeaders).join(', ') || 'none'})`},` +
      ` ${count(check.floorBytes)} bytes against ${count(check.hitBytes)}, a body of ${count(check.bodyBytes)} bytes${check.sameBody ? ', the same bytes' : ' THAT DIFFERS'},` +
      ` ${check.freshRequestIds ? 'a fresh request id per request from each' : 'request ids NOT fresh per request'}` +
      `${check.differingValues.length === 0 ? '' : `; values that differ (hit / floor): ${check.differingValues.join('; ')}`}.`,
    '',
    '| target | valid rounds | req/s | p50 | p99 | server CPU per response | server busy | wrk CPU | others\' CPU | errors | status >= 400 | X-Cache (service\'s count) | req/s vs floor | CPU vs floor | p99 vs floor | req/s vs bare | CPU vs bare |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|',
    ...targets.map((target) => {
      const star = target.fromInvalidRounds ? '*' : ''
      return `| ${target.label} | ${target.validRounds} of ${target.rounds.length} | ${count(Math.round(target.requestsPerSecond))}${star} | ${ms(target.p50Ms)}${star}` +
        ` | ${ms(target.p99Ms)}${star} | ${us(target.serverCpuUs)}${star} | ${pct(target.serverBusy)}${star} | ${pct(target.generatorCpu)}${star} | ${pct(target.othersCpu)}${star}` +
        ` | ${target.errors} | ${target.non2xx} | ${target.xCache === undefined ? 'n/a' : servedCounts(target.xCache, target.responses)}` +
        ` | ${ratio(target, hit.floor, (round) => round.requestsPerSecond)} | ${ratio(target, hit.floor, (round) => round.serverCpuUs)}` +
        ` | ${ratio(target, hit.floor, (round) => round.p99Ms)} | ${ratio(target, hit.bare, (round) => round.requestsPerSecond)}` +
        ` | ${ratio(target, hit.bare, (round) => round.serverCpuUs)} |`
    }),
    '',
    '| round | target | req/s | p50 | p99 | server CPU per response | server busy | wrk CPU | others\' CPU | valid |',
    '|---:|---|---:|---:|---:|---:|---:|---:|---:|---|',
    ...hit.bare.rounds.flatMap((_round, index) => targets.flatMap((target) => {
      const round = target.rounds[index]
      if (round === undefined) return []
      const reasons = invalidReasons(round)
      return [`| ${index + 1} | ${target.label} | ${count(Math.round(round.requestsPerSecond))} | ${ms(round.p50Ms)} | ${ms(round.p99Ms)} | ${us(round.serverCpuUs)}` +
        ` | ${pct(round.serverBusy)} | ${pct(round.generatorCpu)} | ${pct(round.othersCpu)} | ${reasons.length === 0 ? 'yes' : `INVALID: ${reasons.join('; ')}`} |`]
    }))
  ]
}

function shelterSection ({ settings, shelter, zipf }: BenchResults): string[] {
  if (shelter === undefined && zipf === undefined) return []
  const herd = shelter === undefined ? undefined : herdSummary(shelter)
  return [
    '',
    '## Shelter and memory',
    '',
    '| measure | value |',
    '|---|---:|',
    ...(shelter === undefined || herd === undefined
      ? []
      : [
          `| concurrent requests for one cold username, over ${shelter.instances} instances sharing Redis, started for each of ${shelter.rounds.length} rounds, ${fromClients(shelter.clients)} | ${count(shelter.requests)} |`,
          `| upstream calls for it, per round | ${shelter.rounds.map((round) => round.upstreamCalls).join(', ')} |`,
          `| waiters' latency, p50 / p99 (medians of the rounds) | ${ms(herd.p50Ms)} / ${ms(herd.p99Ms)} |`,
          `| their statuses / X-Cache, all rounds | ${statuses(herd.statuses)} / ${statuses(herd.xCache)} |`,
          `| floor: the same burst against ${shelter.instances} fresh bare Fastify instances holding each request ${ms(settings.upstreamLatencyMs)}, p50 / p99` +
            ` | ${ms(herd.floorP50Ms)} / ${ms(herd.floorP99Ms)} |`,
          `| what the service adds over that floor at the median (median of the rounds' differences) | ${signedMs(herd.overFloorMs)} |`
        ]),
    ...(zipf === undefined
      ? []
      : [
          `| Zipf mix (s = ${zipf.exponent}) over ${count(zipf.usernames)} usernames from cold, in-process store: requests | ${count(zipf.requests)} in ${zipf.seconds.toFixed(1)} s |`,
          `| distinct usernames requested / upstream calls | ${count(zipf.distinctRequested)} / ${count(zipf.upstreamCalls)} |`,
          `| usernames the upstream was asked for more than once | ${zipf.usernamesCalledTwice} |`,
          `| token exchanges during the mix / statuses | ${zipf.tokenExchanges} / ${statuses(zipf.statuses)} |`,
          `| RSS of the service (in-process store) after the mix | ${zipf.serviceRssBytes === undefined ? 'n/a' : mib(zipf.serviceRssBytes)} |`
        ]),
    ...(shelter === undefined
      ? []
      : [
          '',
          `| herd round | ${shelter.rounds.map((_round, index) => index + 1).join(' | ')} |`,
          `|---|${shelter.rounds.map(() => '---:').join('|')}|`,
          `| waiters' p50 | ${shelter.rounds.map((round) => ms(round.p50Ms)).join(' | ')} |`,
          `| floor's p50 | ${shelter.rounds.map((round) => ms(round.floorP50Ms)).join(' | ')} |`,
          `| over the floor | ${shelter.rounds.map((round) => signedMs(round.p50Ms - round.floorP50Ms)).join(' | ')} |`
        ])
  ]
}

function batchSection ({ batch }: BenchResults): string[] {
  if (batch === undefined) return []
  return [
    '',
    `## A list page: ${batch.usernames} warm usernames, ${batch.pageViews} page views (in-process store)`,
    '',
    '| page view as | requests | p50 | p99 | body bytes |',
    '|---|---:|---:|---:|---:|',
    `| single \`GET /profile/:username\` over 6 connections | ${batch.singles.requests} | ${ms(batch.singles.p50Ms)} | ${ms(batch.singles.p99Ms)}` +
      ` | ${count(batch.singles.bodyBytes)} |`,
    `| one \`GET /profiles\` batch | ${batch.batch.requests} | ${ms(batch.batch.p50Ms)} | ${ms(batch.batch.p99Ms)}` +
      ` | ${count(batch.batch.bodyBytes)} (brotli: ${count(batch.batch.brotliBytes)}) |`,
    `| batch vs singles, p50 | | ${times(batch.batch.p50Ms / batch.singles.p50Ms)} | | |`
  ]
}

function troubleSection ({ redisTrouble: trouble }: BenchResults): string[] {
  if (trouble === undefined) return []
  return [
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
    `| upstream calls in the 2 s after the restart | ${count(trouble.outage.callsAfterReturn)} |`
  ]
}

function scanSection ({ scan }: BenchResults): string[] {
  if (scan === undefined || scan.length === 0) return []
  return [
    '',
    '## Scan: distinct usernames, each asked once, as fast as the instance answers (fresh instances)',
    '',
    '| instance | NODE_OPTIONS | usernames | in flight | time | statuses | RSS before | peak RSS | settled RSS | live heap before | peak heap used | heap used, settled |',
    '|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|',
    ...scan.map((result) => `| ${result.label} | ${result.nodeOptions === '' ? '(none)' : `\`${result.nodeOptions}\``} | ${count(result.usernames)}` +
      ` | ${result.concurrency} | ${result.seconds.toFixed(1)} s | ${statuses(result.statuses)} | ${mib(result.before.rssBytes)} | ${mib(result.peak.rssBytes)}` +
      ` | ${mib(result.settled.rssBytes)} (after ${result.settled.afterSeconds} s) | ${mib(result.before.heapUsedBytes)} | ${mib(result.peak.heapUsedBytes)}` +
      ` | ${mib(result.settled.heapUsedBytes)} |`)
  ]
}

function sameNames (check: FloorCheck): boolean {
  return missing(check.hitHeaders, check.floorHeaders).length === 0 && missing(check.floorHeaders, check.hitHeaders).length === 0
}
