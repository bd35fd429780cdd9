import { monitorEventLoopDelay, performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { Pool } from 'undici'
import { busiestWindow, closedLoop, pacedLoop, perSecond, Tally } from './budget-load.ts'
import type { BudgetResult } from './budget-report.ts'
import { countedBetween, sampleValues } from './metrics.ts'
import { warm } from './phases.ts'
import type { ProcessGroup, RunningChild } from './processes.ts'
import { deleteKeysUnder } from './redis-keys.ts'
import { callTimes, connectionsTo, simulatorCounts } from './requests.ts'
import { startService, startSimulator } from './targets.ts'
import { seededRandom, zipfSampler } from './zipf.ts'

// Issue 25 point 6: three instances sharing Redis under a fleet-wide budget, a Zipf mix far above it, and hot
// usernames that refresh-ahead is to keep fresh. See bench/README.md, "The upstream budget".

const INSTANCES = 3
const MAX_RPS = 50
/** UPSTREAM_BURST's default: one second of the rate. */
const BURST = MAX_RPS
/** Short, so that each hot entry nears the end of its freshness a few times in one phase. */
const PROFILE_TTL_SECONDS = 20
/** The callers' deadline, set explicitly so that the bench knows it. */
const DEADLINE_MS = 5_000
const ZIPF_EXPONENT = 1.1
const ZIPF_SEED = 20_251_125
const HOT_USERNAMES = 20
const HOT_INTERVAL_MS = 100

export interface BudgetSettings {
  seconds: number
  connections: number
  usernames: number
}

export async function budgetPhase (
  { group, logLevel, redisUrl, keyPrefix, upstreamLatencyMs, settings, log }: {
    group: ProcessGroup
    logLevel: string
    redisUrl: string
    keyPrefix: string
    upstreamLatencyMs: number
    settings: BudgetSettings
    log: (line: string) => void
  }
): Promise<BudgetResult> {
  const redis = { url: redisUrl, keyPrefix: `${keyPrefix}budget:` }
  // UPSTREAM_EXPECTED_INSTANCES as docs/operations.md asks: while an instance sees Redis down, it keeps to its share.
  const env = {
    UPSTREAM_MAX_RPS: String(MAX_RPS),
    UPSTREAM_BURST: String(BURST),
    UPSTREAM_EXPECTED_INSTANCES: String(INSTANCES),
    PROFILE_TTL_SECONDS: String(PROFILE_TTL_SECONDS),
    UPSTREAM_TIMEOUT_MS: String(DEADLINE_MS)
  }
  const simulator = await startSimulator(group, upstreamLatencyMs, 'simulator-budget')
  const instances: RunningChild[] = []
  const pools: Pool[] = []
  try {
    for (let index = 0; index < INSTANCES; index++) {
      instances.push(await startService(group, { name: `service-budget-${index}`, simulator, logLevel, redis, env }))
    }
    const hotPaths = Array.from({ length: HOT_USERNAMES }, (_, index) => `/profile/budget-hot-${index}`)
    log(`budget: warming ${HOT_USERNAMES} hot usernames on each of ${INSTANCES} instances (UPSTREAM_MAX_RPS=${MAX_RPS}, PROFILE_TTL_SECONDS=${PROFILE_TTL_SECONDS})`)
    for (const instance of instances) await warm(instance, hotPaths)

    // A connection per Zipf caller, and as many as the hot stream needs (it does not wait for answers): no request
    // ever waits for a connection in the load generator, so a latency is the service's.
    const zipfPools = instances.map((instance) => connectionsTo(instance.url, Math.ceil(settings.connections / INSTANCES)))
    const hotPools = instances.map((instance) => new Pool(instance.url, { connections: null, headersTimeout: 10_000, bodyTimeout: 10_000 }))
    pools.push(...zipfPools, ...hotPools)
    // Every connection opened before the load, so that none of its latencies is a connection's set-up.
    await Promise.all(zipfPools.map(async (pool) => await Promise.all(Array.from({ length: Math.ceil(settings.connections / INSTANCES) }, async () => {
      await (await pool.request({ method: 'GET', path: '/healthz' })).body.dump()
    }))))
    const before = await Promise.all(instances.map(async (instance) => await metricsText(instance.url)))
    const sample = zipfSampler(settings.usernames, ZIPF_EXPONENT, seededRandom(ZIPF_SEED))
    log(`budget: ${settings.seconds} s of a Zipf mix over ${settings.usernames} usernames (${settings.connections} callers in a closed loop) and the hot usernames every ${HOT_INTERVAL_MS} ms`)

    // The calls from here on are the phase's: the simulator keeps each one's arrival time, read at the end.
    const callsBefore = (await simulatorCounts(simulator.url)).dataCalls
    const sampling = { running: true }
    // Whether each instance sees Redis up (pbff_redis_up), once a second: while it does not, it keeps to its share.
    const redisDown = instances.map(() => 0)
    // And how late each one's event loop ran, worst second (prom-client resets its histogram at each scrape).
    const instanceLag = instances.map(() => ({ p99Ms: 0, maxMs: 0 }))
    let redisSamples = 0
    const redisSampler = (async () => {
      while (sampling.running) {
        const texts = await Promise.all(instances.map(async (instance) => await metricsText(instance.url).catch(() => '')))
        redisSamples++
        texts.forEach((text, index) => { if (sampleValues(text, 'pbff_redis_up')[0]?.value !== 1) redisDown[index] = (redisDown[index] ?? 0) + 1 })
        texts.forEach((text, index) => {
          const lag = instanceLag[index]
          if (lag === undefined) return
          lag.p99Ms = Math.max(lag.p99Ms, 1_000 * (sampleValues(text, 'nodejs_eventloop_lag_p99_seconds')[0]?.value ?? 0))
          lag.maxMs = Math.max(lag.maxMs, 1_000 * (sampleValues(text, 'nodejs_eventloop_lag_max_seconds')[0]?.value ?? 0))
        })
        await sleep(1_000)
      }
    })()
    const cpuBefore = instances.map((instance) => instance.cpu()?.processMs ?? Number.NaN)
    const generatorCpu = process.cpuUsage()
    const generatorLag = monitorEventLoopDelay({ resolution: 10 })
    generatorLag.enable()
    const started = performance.now()
    const until = started + settings.seconds * 1_000
    const running = (): boolean => performance.now() < until
    const zipf = new Tally(DEADLINE_MS, started)
    const hot = new Tally(DEADLINE_MS, started)
    await Promise.all([
      closedLoop({ pools: zipfPools, connections: settings.connections, nextPath: () => `/profile/budget-zipf-${sample()}`, running, tally: zipf }),
      pacedLoop({ pools: hotPools, paths: hotPaths, intervalMs: HOT_INTERVAL_MS, running, tally: hot })
    ])
    const seconds = (performance.now() - started) / 1_000
    // Until the last answer: what each instance's whole process used, in cores (1.00: one core throughout).
    const instanceCores = instances.map((instance, index) => ((instance.cpu()?.processMs ?? Number.NaN) - (cpuBefore[index] as number)) / 1_000 / seconds)
    generatorLag.disable()
    const usage = process.cpuUsage(generatorCpu)
    // The load generator (this process): its CPU in cores, and how late its event loop ran (p99, max), which every latency it measured includes.
    const generator = { cores: (usage.user + usage.system) / 1e6 / seconds, lagP99Ms: generatorLag.percentile(99) / 1e6, lagMaxMs: generatorLag.max / 1e6 }
    // Background refreshes the last answers started land within a second or two.
    await sleep(2_000)
    sampling.running = false
    await redisSampler
    const after = await Promise.all(instances.map(async (instance) => await metricsText(instance.url)))

    const times = await callTimes(simulator.url, callsBefore)
    const result: BudgetResult = {
      instances: INSTANCES,
      maxRps: MAX_RPS,
      burst: BURST,
      profileTtlSeconds: PROFILE_TTL_SECONDS,
      deadlineMs: DEADLINE_MS,
      upstreamLatencyMs,
      seconds,
      instanceCores,
      generator,
      zipf: { usernames: settings.usernames, exponent: ZIPF_EXPONENT, connections: settings.connections, result: zipf.summary() },
      hot: { usernames: HOT_USERNAMES, intervalMs: HOT_INTERVAL_MS, result: hot.summary() },
      upstream: { calls: times.length, busiest: busiestWindow(times), perSecond: perSecond(times) },
      classes: budgetClasses(before, after),
      redisDown: { samples: redisSamples, perInstance: redisDown },
      instanceLag
    }
    log(`  upstream: ${result.upstream.calls} calls, at most ${result.upstream.busiest.calls} in a 1-second window; by class ${JSON.stringify(result.classes.calls)}`)
    log(`  Zipf: ${JSON.stringify(result.zipf.result.outcomes)}; hot: ${JSON.stringify(result.hot.result.outcomes)}`)
    return result
  } finally {
    await Promise.all(pools.map(async (pool) => { await pool.close().catch(() => {}) }))
    await Promise.all(instances.map(async (instance) => { await instance.stop() }))
    await simulator.stop()
    await deleteKeysUnder(redis.url, redis.keyPrefix).catch(() => 0)
  }
}

/** The budget's counters summed over the instances, `after` less `before`: calls and deferrals by class, drops by class and reason. */
export function budgetClasses (before: string[], after: string[]): BudgetResult['classes'] {
  const sum = (texts: string[], metric: string, key: (labels: Record<string, string>) => string): Record<string, number> => {
    const totals: Record<string, number> = {}
    for (const text of texts) {
      for (const { labels, value } of sampleValues(text, metric)) totals[key(labels)] = (totals[key(labels)] ?? 0) + value
    }
    return totals
  }
  const counted = (metric: string, key: (labels: Record<string, string>) => string): Record<string, number> =>
    countedBetween({ statuses: sum(before, metric, key), xCache: {} }, { statuses: sum(after, metric, key), xCache: {} }).statuses
  const priority = (labels: Record<string, string>): string => labels.priority ?? 'none'
  return {
    calls: counted('pbff_upstream_budget_calls_total', priority),
    deferred: counted('pbff_upstream_budget_deferred_total', priority),
    dropped: counted('pbff_upstream_budget_dropped_total', (labels) => `${priority(labels)} ${labels.reason ?? 'none'}`)
  }
}

async function metricsText (url: string): Promise<string> {
  const response = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(10_000) })
  if (!response.ok) throw new Error(`${url}/metrics answered ${response.status}`)
  return await response.text()
}
