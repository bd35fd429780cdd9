import { performance } from 'node:perf_hooks'
import { Redis } from 'ioredis'
import { request, type Pool } from 'undici'
import { cpuMeter } from './cpu-meter.ts'
import { OwnRedis } from './own-redis.ts'
import type { ProcessGroup, RunningChild } from './processes.ts'
import { callTimes, connectionsTo, countBy, monotonicMs, simulatorCounts, timedGet, type Timed } from './requests.ts'
import { median, percentile } from './stats.ts'
import { aroundTheCall, ORDERS, type AroundTheCall, type Quartet, type SentAt, type Target } from './quartets.ts'
import { startBareProxy, startService, startSimulator, type Simulator } from './targets.ts'

/** Issue 33's setting: the upstream at 20 ms, the token held, one connection, one miss at a time. */
const LATENCY_MS = 20
const CONCURRENCY = 50

export interface MissRun {
  misses: number
  statuses: Record<string, number>
  xCache: Record<string, number>
  service: { p50Ms: number, p99Ms: number }
  direct: { p50Ms: number, p99Ms: number }
  /** The floor: bare Fastify forwarding to the same upstream (bare-proxy.ts). */
  proxy: { p50Ms: number, p99Ms: number }
  /** The floor with a shared cache: the same, between one awaited Redis read and one awaited write. */
  redisProxy: { p50Ms: number, p99Ms: number }
  /** The service over the direct call (issue 33's goal). Sequential: the median and 99th percentile of the per-miss differences; concurrent: the differences of the p50s and p99s. */
  overheadP50Ms: number
  overheadP99Ms: number
  /** The service over the bare proxy: its own work, the hop set aside. */
  overProxy: { p50Ms: number, p99Ms: number }
  /** The bare proxy over the direct call: what one loopback hop costs on this machine. */
  hop: { p50Ms: number, p99Ms: number }
  /** The bare Redis proxy over the direct call: what one loopback hop and two awaited Redis round trips cost on this machine. */
  redisFloor: { p50Ms: number, p99Ms: number }
  /** The service over the bare Redis proxy: its own work, the hop and two Redis round trips set aside (for the Redis store). */
  overRedisProxy: { p50Ms: number, p99Ms: number }
  /** The service's process CPU (every thread) over the run, per miss. */
  cpuPerMissUs: number
  /** The bare proxy's, per miss it forwarded. */
  proxyCpuPerMissUs: number
  /** The bare Redis proxy's, per miss it forwarded. */
  redisProxyCpuPerMissUs: number
  /** The upstream simulator's, per call it answered (each miss is four calls: the service's, the two proxies', the direct one). */
  upstreamCpuPerCallUs: number
  /** The load generator's (this process), as a share of one core over the run: far below 1, it is not what limits. */
  generatorCoreShare: number
  upstreamCallsPerMiss: number
  /** Commands Redis executed per miss (INFO commandstats, on a redis-server of the phase's own); absent in-process. */
  redisCommandsPerMiss?: number
  /**
   * One at a time: where each target's time goes, before its upstream call arrives and after; absent for the concurrent
   * run, and when the calls were not one per miss, each within its miss (no split is then better than a wrong one).
   */
  aroundTheCall?: AroundTheCall
}

export interface MissResult {
  latencyMs: number
  sequential: { memory: MissRun, redis: MissRun }
  concurrent: { memory: MissRun, redis: MissRun, concurrency: number }
}

/**
 * Cold misses through the service beside the same upstream called directly with a bearer token, through a bare
 * proxy (the floor of one extra hop) and through a bare proxy awaiting a Redis read before the call and a write after
 * it (the floor with a shared cache), in the same run: one at a time on one keep-alive connection each (the four
 * take turns, so a machine growing busier weighs on all), then 50 at a time. Both stores; the service's Redis and the
 * bare proxy's are servers of the phase's own, so the command counts are the service's alone.
 */
export async function missPhase (
  { group, logLevel, misses, runId, log }: { group: ProcessGroup, logLevel: string, misses: number, runId: string, log: (line: string) => void }
): Promise<MissResult> {
  const simulator = await startSimulator(group, LATENCY_MS, 'simulator-miss')
  const redis = await OwnRedis.start()
  let proxyRedis: OwnRedis | undefined
  const stats = new Redis(redis.url)
  try {
    proxyRedis = await OwnRedis.start()
    const authorization = `Bearer ${await token(simulator)}`
    const memory = await startService(group, { name: 'service-miss-memory', simulator, logLevel })
    const shared = await startService(group, { name: 'service-miss-redis', simulator, logLevel, redis: { url: redis.url, keyPrefix: 'pbff-bench-miss:' } })
    const bare = await startBareProxy(group, { name: 'bare-proxy-miss', upstream: simulator.url, authorization })
    const bareRedis = await startBareProxy(group, { name: 'bare-redis-proxy-miss', upstream: simulator.url, authorization, redisUrl: proxyRedis.url })
    const direct = connectionsTo(simulator.url, CONCURRENCY)
    const run = async (service: RunningChild, tag: string, concurrency: number, count: number): Promise<MissRun> => {
      const targets = {
        service: connectionsTo(service.url, concurrency), proxy: connectionsTo(bare.url, concurrency), redisProxy: connectionsTo(bareRedis.url, concurrency), direct
      }
      try {
        // The token, the connections and the first compilation: not a cold miss's cost.
        await Promise.all([
          timedGet(targets.service, `/profile/miss-warm-${tag}`), timedGet(targets.proxy, `/profile/proxy-warm-${tag}`), timedGet(targets.redisProxy, `/profile/redis-proxy-warm-${tag}`)
        ])
        const commandsBefore = await commandCount(stats)
        const callsBefore = (await simulatorCounts(simulator.url)).dataCalls
        const cpu = cpuMeter({ service, proxy: bare, redisProxy: bareRedis, upstream: simulator })
        const { quartets, sentAt } = concurrency === 1
          ? await sequential(targets, authorization, `${runId}-${tag}`, count)
          : { quartets: await concurrent(targets, authorization, `${runId}-${tag}`, count, concurrency), sentAt: undefined }
        const used = cpu()
        assertFloorsAnswered(quartets)
        // The direct call and both proxies' are data calls too: one each per miss.
        const calls = (await simulatorCounts(simulator.url)).dataCalls - callsBefore
        const upstreamCalls = calls - 3 * count
        const commands = await commandCount(stats) - commandsBefore - 1
        const split = sentAt === undefined ? undefined : aroundTheCall(quartets, sentAt, await callTimes(simulator.url, callsBefore), LATENCY_MS)
        return {
          ...summarize(quartets, concurrency === 1, upstreamCalls, service === shared ? commands : undefined),
          ...(split !== undefined && { aroundTheCall: split }),
          cpuPerMissUs: used.service * 1000 / count,
          proxyCpuPerMissUs: used.proxy * 1000 / count,
          redisProxyCpuPerMissUs: used.redisProxy * 1000 / count,
          upstreamCpuPerCallUs: used.upstream * 1000 / calls,
          generatorCoreShare: used.generator / used.wall
        }
      } finally {
        await Promise.all([targets.service.close(), targets.proxy.close(), targets.redisProxy.close()])
      }
    }
    log(`miss: ${misses} cold misses one at a time, then ${misses} ${CONCURRENCY} at a time, upstream at ${LATENCY_MS} ms, both stores`)
    const result: MissResult = {
      latencyMs: LATENCY_MS,
      sequential: { memory: await run(memory, 'seq-memory', 1, misses), redis: await run(shared, 'seq-redis', 1, misses) },
      concurrent: { memory: await run(memory, 'par-memory', CONCURRENCY, misses), redis: await run(shared, 'par-redis', CONCURRENCY, misses), concurrency: CONCURRENCY }
    }
    await direct.close()
    await Promise.all([memory.stop(), shared.stop(), bare.stop(), bareRedis.stop()])
    return result
  } finally {
    stats.disconnect()
    redis.stop()
    proxyRedis?.stop()
    await simulator.stop()
  }
}

/** A floor that failed answered fast and called nobody: no floor at all. */
function assertFloorsAnswered (quartets: Quartet[]): void {
  for (const target of ['direct', 'proxy', 'redisProxy'] as const) {
    const failed = quartets.filter((quartet) => quartet[target].status !== 200).length
    if (failed > 0) throw new Error(`the ${target} floor failed ${failed} of ${quartets.length} misses`)
  }
}

/** How to make one miss on each target, by username. */
function getters (pools: Record<Target, Pool>, authorization: string, tag: string): Record<Target, (index: number) => Promise<Timed>> {
  return {
    service: async (index) => await timedGet(pools.service, `/profile/miss-${tag}-${index}`),
    proxy: async (index) => await timedGet(pools.proxy, `/profile/proxy-${tag}-${index}`),
    redisProxy: async (index) => await timedGet(pools.redisProxy, `/profile/redis-proxy-${tag}-${index}`),
    direct: async (index) => await directGet(pools.direct, `/profile/direct-${tag}-${index}`, authorization)
  }
}

async function sequential (
  pools: Record<Target, Pool>, authorization: string, tag: string, count: number
): Promise<{ quartets: Quartet[], sentAt: SentAt[] }> {
  const get = getters(pools, authorization, tag)
  const quartets: Quartet[] = []
  const sentAt: SentAt[] = []
  for (let index = 0; index < count; index++) {
    const quartet: Partial<Quartet> = {}
    const sent: Partial<SentAt> = {}
    for (const target of ORDERS[index % ORDERS.length] as Target[]) {
      sent[target] = monotonicMs()
      quartet[target] = await get[target](index)
    }
    quartets.push(quartet as Quartet)
    sentAt.push(sent as SentAt)
  }
  return { quartets, sentAt }
}

async function concurrent (pools: Record<Target, Pool>, authorization: string, tag: string, count: number, concurrency: number): Promise<Quartet[]> {
  const drive = async (get: (index: number) => Promise<Timed>): Promise<Timed[]> => {
    const results = new Array<Timed>(count)
    let next = 0
    const worker = async (): Promise<void> => {
      while (next < count) {
        const index = next++
        results[index] = await get(index)
      }
    }
    await Promise.all(Array.from({ length: concurrency }, worker))
    return results
  }
  const get = getters(pools, authorization, tag)
  const services = await drive(get.service)
  const directs = await drive(get.direct)
  const proxies = await drive(get.proxy)
  const redisProxies = await drive(get.redisProxy)
  return services.map((service, index) => ({ service, direct: directs[index] as Timed, proxy: proxies[index] as Timed, redisProxy: redisProxies[index] as Timed }))
}

/** `paired`: each service miss has its own direct call and proxies' calls beside it, so the overheads are taken miss by miss. */
function summarize (
  quartets: Quartet[], paired: boolean, upstreamCalls: number, commands: number | undefined
): Omit<MissRun, 'cpuPerMissUs' | 'proxyCpuPerMissUs' | 'redisProxyCpuPerMissUs' | 'upstreamCpuPerCallUs' | 'generatorCoreShare'> {
  const times = (target: Target): number[] => quartets.map((quartet) => quartet[target].ms)
  const spread = (target: Target): { p50Ms: number, p99Ms: number } => ({ p50Ms: median(times(target)), p99Ms: percentile(times(target), 99) })
  const over = (slower: Target, faster: Target): { p50Ms: number, p99Ms: number } => {
    if (!paired) return { p50Ms: spread(slower).p50Ms - spread(faster).p50Ms, p99Ms: spread(slower).p99Ms - spread(faster).p99Ms }
    const differences = quartets.map((quartet) => quartet[slower].ms - quartet[faster].ms)
    return { p50Ms: median(differences), p99Ms: percentile(differences, 99) }
  }
  const overhead = over('service', 'direct')
  return {
    misses: quartets.length,
    statuses: countBy(quartets.map((quartet) => quartet.service), (result) => String(result.status)),
    xCache: countBy(quartets.map((quartet) => quartet.service), (result) => result.xCache ?? 'none'),
    service: spread('service'),
    direct: spread('direct'),
    proxy: spread('proxy'),
    redisProxy: spread('redisProxy'),
    overheadP50Ms: overhead.p50Ms,
    overheadP99Ms: overhead.p99Ms,
    overProxy: over('service', 'proxy'),
    hop: over('proxy', 'direct'),
    redisFloor: over('redisProxy', 'direct'),
    overRedisProxy: over('service', 'redisProxy'),
    upstreamCallsPerMiss: upstreamCalls / quartets.length,
    ...(commands !== undefined && { redisCommandsPerMiss: commands / quartets.length })
  }
}

async function directGet (pool: Pool, path: string, authorization: string): Promise<Timed> {
  const started = performance.now()
  const response = await pool.request({ method: 'GET', path, headers: { authorization, 'content-type': 'application/json' } })
  const body = await response.body.text()
  return { status: response.statusCode, ms: performance.now() - started, xCache: undefined, body }
}

async function token (simulator: Simulator): Promise<string> {
  const response = await request(`${simulator.url}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_id: 'dev-client', client_secret: 'dev-secret', audience: simulator.url, grant_type: 'client_credentials' })
  })
  const { access_token: accessToken } = await response.body.json() as { access_token: string }
  return accessToken
}

/** Every command Redis has executed so far (INFO commandstats): an earlier INFO included, not this one. */
export async function commandCount (client: Redis): Promise<number> {
  const info = await client.info('commandstats')
  let total = 0
  for (const match of info.matchAll(/calls=(\d+)/g)) total += Number(match[1])
  return total
}
