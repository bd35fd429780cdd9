import { count, ms, pct, signedMs, statuses, us } from './format.ts'
import type { MissRun } from './miss.ts'
import type { BenchResults } from './results.ts'

/** Issue 33's goals for the sequential run's overhead p50 (its p99 within twice that): the 2-core AMD machines', and the slower Intel ones'. */
const GOALS = { amd: { memory: 0.5, redis: 1 }, intel: { memory: 1, redis: 1.5 } } as const

export function missSection ({ miss }: BenchResults): string[] {
  if (miss === undefined) return []
  const spread = (times: { p50Ms: number, p99Ms: number }): string => `${ms(times.p50Ms)} / ${ms(times.p99Ms)}`
  const over = (times: { p50Ms: number, p99Ms: number }): string => `${signedMs(times.p50Ms)} / ${signedMs(times.p99Ms)}`
  const runs: Array<[string, MissRun]> = [
    ['one at a time, in-process', miss.sequential.memory],
    ['one at a time, Redis', miss.sequential.redis],
    [`${miss.concurrent.concurrency} at a time, in-process`, miss.concurrent.memory],
    [`${miss.concurrent.concurrency} at a time, Redis`, miss.concurrent.redis]
  ]
  const times = ([label, run]: [string, MissRun]): string =>
    `| ${label} | ${spread(run.service)} | ${spread(run.direct)} | ${spread(run.proxy)} | ${spread(run.redisProxy)} | ${over({ p50Ms: run.overheadP50Ms, p99Ms: run.overheadP99Ms })} |` +
    ` ${over(run.overProxy)} | ${over(run.overRedisProxy)} | ${over(run.hop)} | ${over(run.redisRoundTrips)} |`
  const costs = ([label, run]: [string, MissRun]): string =>
    `| ${label} | ${us(run.cpuPerMissUs)} / ${us(run.proxyCpuPerMissUs)} / ${us(run.redisProxyCpuPerMissUs)} / ${us(run.upstreamCpuPerCallUs)} | ${pct(run.generatorCoreShare)} |` +
    ` ${run.redisCommandsPerMiss?.toFixed(2) ?? '-'} | ${run.upstreamCallsPerMiss.toFixed(2)} | ${statuses(run.statuses)}; ${Object.entries(run.xCache).map(([state, n]) => `${state} ${count(n)}`).join(', ')} |`
  return [
    '',
    `## Cold misses (issue 33): ${miss.sequential.memory.misses} one at a time, then ${miss.concurrent.memory.misses} ${miss.concurrent.concurrency} at a time, upstream at ${ms(miss.latencyMs)}`,
    '',
    'Each miss through the service beside a direct call to the same upstream with a bearer token, a call through a bare proxy' +
      ' (bare Fastify forwarding over an undici Pool: the floor of one extra hop), and one through a bare Redis proxy (the same,' +
      ' awaiting one Redis read before the call and one write after it: the floor of a cache shared through Redis). One at a time: the' +
      ' four take turns on one keep-alive connection each, the overheads taken miss by miss; concurrent: the service\'s burst, then the' +
      ' direct one, then each proxy\'s, the overheads the differences of their percentiles. CPU is each process\'s, every thread: the' +
      ' service\'s and the proxies\' per miss, the upstream simulator\'s per call; the load generator\'s as a share of one core. Redis' +
      ' commands are counted by a redis-server of the service\'s own (INFO commandstats): commands, not round trips (pipelined commands' +
      ' count each).',
    '',
    '| run | service p50 / p99 | direct p50 / p99 | bare proxy p50 / p99 | bare Redis proxy p50 / p99 | overhead over direct p50 / p99 |' +
      ' over the bare proxy | over the bare Redis proxy | the hop (proxy over direct) | two Redis round trips (Redis proxy over proxy) |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...runs.map(times),
    '',
    '| run | CPU per miss: service / proxy / Redis proxy / upstream per call | load generator | Redis commands per miss | upstream calls per miss | answers |',
    '|---|---|---|---|---|---|',
    ...runs.map(costs)
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
