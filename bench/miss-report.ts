import { count, ms, pct, signedMs, statuses, us } from './format.ts'
import type { MissRun } from './miss.ts'
import type { BeforeAndAfter } from './quartets.ts'
import type { BenchResults } from './results.ts'

/** Issue 33's goals for the sequential run's overhead p50 (its p99 within twice that): the 2-core AMD machines', and the slower Intel ones'. */
const GOALS = { amd: { memory: 0.5, redis: 1 }, intel: { memory: 1, redis: 1.5 } } as const

export function missSection ({ miss }: BenchResults): string[] {
  if (miss === undefined) return []
  const spread = (times: { p50Ms: number, p99Ms: number }): string => `${ms(times.p50Ms)} / ${ms(times.p99Ms)}`
  const over = (times: { p50Ms: number, p99Ms: number }): string => `${signedMs(times.p50Ms)} / ${signedMs(times.p99Ms)}`
  const oneAtATime: Array<[string, MissRun, 'memory' | 'redis']> = [
    ['one at a time, in-process', miss.sequential.memory, 'memory'],
    ['one at a time, Redis', miss.sequential.redis, 'redis']
  ]
  const runs: Array<[string, MissRun, 'memory' | 'redis']> = [
    ...oneAtATime,
    [`${miss.concurrent.concurrency} at a time, in-process`, miss.concurrent.memory, 'memory'],
    [`${miss.concurrent.concurrency} at a time, Redis`, miss.concurrent.redis, 'redis']
  ]
  const times = ([label, run, store]: [string, MissRun, string]): string =>
    `| ${label} | ${spread(run.service)} | ${spread(run.direct)} | ${spread(run.proxy)} | ${spread(run.redisProxy)} | ${over({ p50Ms: run.overheadP50Ms, p99Ms: run.overheadP99Ms })} |` +
    ` ${over(run.hop)} | ${over(run.redisFloor)} | ${over(run.overProxy)} | ${store === 'redis' ? over(run.overRedisProxy) : '-'} |`
  const costs = ([label, run]: [string, MissRun, string]): string =>
    `| ${label} | ${us(run.cpuPerMissUs)} / ${us(run.proxyCpuPerMissUs)} / ${us(run.redisProxyCpuPerMissUs)} / ${us(run.upstreamCpuPerCallUs)} | ${pct(run.generatorCoreShare)} |` +
    ` ${run.redisCommandsPerMiss?.toFixed(2) ?? '-'} | ${run.upstreamCallsPerMiss.toFixed(2)} | ${statuses(run.statuses)}; ${Object.entries(run.xCache).map(([state, n]) => `${state} ${count(n)}`).join(', ')} |`
  const split = ({ beforeMs, afterMs }: BeforeAndAfter): string => `${ms(beforeMs)} / ${ms(afterMs)}`
  const splitOver = ({ beforeMs, afterMs }: BeforeAndAfter): string => `${signedMs(beforeMs)} / ${signedMs(afterMs)}`
  const around = ([label, run, store]: [string, MissRun, string]): string => {
    const { aroundTheCall } = run
    if (aroundTheCall === undefined) return `| ${label} | no split: the upstream calls were not one per miss, each within it | | | | | |`
    const { targets } = aroundTheCall
    return `| ${label} | ${split(targets.service)} | ${split(targets.direct)} | ${split(targets.proxy)} | ${split(targets.redisProxy)} |` +
      ` ${splitOver(aroundTheCall.overProxy)} | ${store === 'redis' ? splitOver(aroundTheCall.overRedisProxy) : '-'} |`
  }
  return [
    '',
    `## Cold misses (issue 33): ${miss.sequential.memory.misses} one at a time, then ${miss.concurrent.memory.misses} ${miss.concurrent.concurrency} at a time, upstream at ${ms(miss.latencyMs)}`,
    '',
    'Each miss through the service beside a direct call to the same upstream with a bearer token, a call through a bare proxy' +
      ' (bare Fastify forwarding over an undici Pool: the floor of one extra hop), and one through a bare Redis proxy (the same,' +
      ' awaiting one Redis read before the call and one write after it, on a redis-server of its own: the floor of a cache shared' +
      ' through Redis). One at a time: the four take turns on one keep-alive connection each, the figures over another taken miss by' +
      ' miss (p50 and p99 of the differences); concurrent: the service\'s burst, then the direct one, then each proxy\'s, the figures' +
      ' the differences of their percentiles. CPU is each process\'s, every thread: the service\'s and the proxies\' per miss (one at' +
      ' a time, with each process\'s idle work over the run: compare the concurrent run\'s), the upstream simulator\'s per call;' +
      ' the load generator\'s as a share of one core. Redis commands are those of the service\'s own' +
      ' redis-server (INFO commandstats) over the run, per miss: commands, not round trips (those inside a script and those pipelined' +
      ' count each), its timed background ones included (the rate limit\'s sync every 100 ms, the health check\'s TIME every second).' +
      ' Answers are the service\'s; a floor that answers anything but 200 stops the run.',
    '',
    '| run | service p50 / p99 | direct p50 / p99 | bare proxy p50 / p99 | bare Redis proxy p50 / p99 | service over direct p50 / p99 |' +
      ' bare proxy over direct (the hop) p50 / p99 | bare Redis proxy over direct p50 / p99 | service over the bare proxy p50 / p99 |' +
      ' service over the bare Redis proxy p50 / p99 |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...runs.map(times),
    '',
    '| run | CPU per miss: service / proxy / Redis proxy / upstream per call | load generator | Redis commands per miss | upstream calls per miss | the service\'s answers |',
    '|---|---|---|---|---|---|',
    ...runs.map(costs),
    '',
    'Where the time goes, one at a time: each miss split at its upstream call\'s arrival (the simulator\'s clock, which the' +
      ` harness shares), before it / after it less the upstream's ${ms(miss.latencyMs)}; medians, and the service's over` +
      ' each proxy taken miss by miss.',
    '',
    '| run | service before / after | direct before / after | bare proxy before / after | bare Redis proxy before / after |' +
      ' service over the bare proxy, before / after | service over the bare Redis proxy, before / after |',
    '|---|---|---|---|---|---|---|',
    ...oneAtATime.map(around)
  ]
}

export function missVerdicts ({ machine, miss }: BenchResults): Array<{ target: string, goal: string, measured: string, pass: boolean | undefined }> {
  if (miss === undefined) return []
  const goals = /intel/i.test(machine.cpuModel) ? GOALS.intel : GOALS.amd
  return (['memory', 'redis'] as const).map((store) => {
    const run = miss.sequential[store]
    const goal = goals[store]
    return {
      target: `cold miss overhead, ${store === 'memory' ? 'in-process' : 'Redis'} (issue 33)`,
      goal: `p50 <= ${ms(goal)}, p99 <= ${ms(2 * goal)}`,
      measured: `${signedMs(run.overheadP50Ms)} / ${signedMs(run.overheadP99Ms)}`,
      pass: run.overheadP50Ms <= goal && run.overheadP99Ms <= 2 * goal && run.upstreamCallsPerMiss <= 1
    }
  })
}
