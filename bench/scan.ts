import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { npmStartOptionsAt } from './build.ts'
import { productionMemory } from './container.ts'
import { heapUsedBytes } from './metrics.ts'
import type { ProcessGroup, RunningChild } from './processes.ts'
import { deleteKeysUnder } from './redis-keys.ts'
import { connectionsTo } from './requests.ts'
import type { ScanResult } from './results.ts'
import { startService, startSimulator, type Simulator } from './targets.ts'

/** How often the live heap is read from /metrics during a scan. */
const SAMPLE_MS = 200

/** One instance to scan: how it is started, and the ceiling its peak RSS is checked against. */
export interface ScanTarget {
  label: string
  nodeOptions: string
  /** Started as the image starts it (its CMD), rather than as `npm start` does. */
  asImage: boolean
  redis?: { url: string, keyPrefix: string }
  goal: ScanResult['goal']
}

/**
 * Issue 23's scan: `usernames` distinct usernames, each asked once, `concurrency` at a time (as fast as the instance
 * answers them, against an upstream that answers at once), through a fresh instance. Reports the instance's RSS and
 * live heap (prom-client's `nodejs_heap_size_used_bytes`, sampled every SAMPLE_MS) before, at their peak (VmHWM for
 * the RSS) and `settleSeconds` after the last answer.
 */
export async function scan (
  { group, simulator, logLevel, usernames, concurrency, settleSeconds, target }: {
    group: ProcessGroup
    simulator: Simulator
    logLevel: string
    usernames: number
    concurrency: number
    settleSeconds: number
    target: ScanTarget
  }
): Promise<ScanResult> {
  const name = `service-scan-${target.label.replace(/[^a-z0-9]+/gi, '-').toLowerCase()}`
  const service = await startService(group, {
    name,
    simulator,
    logLevel,
    nodeOptions: target.nodeOptions,
    asImage: target.asImage,
    ...(target.redis !== undefined && { redis: target.redis })
  })
  try {
    const before = await memoryOf(service)
    let peakHeap = before.heapUsedBytes
    const sampling = { running: true }
    const sampler = (async () => {
      while (sampling.running) {
        await sleep(SAMPLE_MS)
        const heap = await heapUsedBytes(service.url).catch(() => undefined)
        if (heap !== undefined && heap > peakHeap) peakHeap = heap
      }
    })()
    const started = performance.now()
    const statuses = await askEach(service.url, usernames, concurrency, (index) => `/profile/scan-${index}`)
    const seconds = (performance.now() - started) / 1000
    sampling.running = false
    await sampler
    await sleep(settleSeconds * 1000)
    const settled = await memoryOf(service)
    // VmHWM, read last: the peak over the whole life of the instance, the settling included.
    const peakRss = service.memory()?.peakRssBytes ?? Number.NaN
    return {
      label: target.label,
      nodeOptions: target.nodeOptions,
      usernames,
      concurrency,
      seconds,
      statuses,
      before,
      peak: { rssBytes: peakRss, heapUsedBytes: Math.max(peakHeap, settled.heapUsedBytes) },
      settled: { ...settled, afterSeconds: settleSeconds },
      goal: target.goal
    }
  } finally {
    await service.stop()
    if (target.redis !== undefined) await deleteKeysUnder(target.redis.url, target.redis.keyPrefix).catch(() => 0)
  }
}

async function memoryOf (service: RunningChild): Promise<{ rssBytes: number, heapUsedBytes: number }> {
  return { rssBytes: service.rss() ?? Number.NaN, heapUsedBytes: await heapUsedBytes(service.url) ?? Number.NaN }
}

/** Each of `count` paths once, `concurrency` at a time; the statuses counted (0: no answer), the bodies read and dropped. */
async function askEach (url: string, count: number, concurrency: number, pathOf: (index: number) => string): Promise<Record<string, number>> {
  const pool = connectionsTo(url, concurrency)
  const statuses: Record<string, number> = {}
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < count) {
      const path = pathOf(next++)
      const status = await pool.request({ method: 'GET', path }).then(async (response) => {
        await response.body.dump()
        return response.statusCode
      }, () => 0)
      statuses[status] = (statuses[status] ?? 0) + 1
    }
  }
  try {
    await Promise.all(Array.from({ length: concurrency }, worker))
    return statuses
  } finally {
    await pool.close()
  }
}

const MIB = 1024 * 1024
/** Issue 23: `npm start` with its defaults peaks under this; in the manifest's container, under this share of its limit. */
const NPM_START_MAX_PEAK_BYTES = 256 * MIB
const CONTAINER_MAX_PEAK_SHARE = 0.7

/**
 * The scan phase: three fresh instances against an upstream of their own that answers at once: the in-process store
 * as `npm start` runs it (its node options, no NODE_OPTIONS), and both stores as the image runs them, with its
 * NODE_OPTIONS as Node resolves them in the manifest's container (see container.ts).
 */
export async function scanPhase (
  { group, root, logLevel, redisUrl, keyPrefix, usernames, concurrency, settleSeconds, log }: {
    group: ProcessGroup
    root: string
    logLevel: string
    redisUrl: string
    keyPrefix: string
    usernames: number
    concurrency: number
    settleSeconds: number
    log: (line: string) => void
  }
): Promise<ScanResult[]> {
  const production = productionMemory(root)
  const startOptions = npmStartOptionsAt(root)
  const limit = `${Math.round(production.limitBytes / MIB)}Mi`
  const container = { maxPeakRssBytes: production.limitBytes * CONTAINER_MAX_PEAK_SHARE, reason: `${CONTAINER_MAX_PEAK_SHARE * 100}% of the manifest's ${limit}` }
  const targets: ScanTarget[] = [
    {
      label: `in-process store, \`npm start\` (${startOptions.length === 0 ? 'node with no options' : `node ${startOptions.join(' ')}`}, no NODE_OPTIONS)`,
      nodeOptions: '',
      asImage: false,
      goal: { maxPeakRssBytes: NPM_START_MAX_PEAK_BYTES, reason: '`npm start` with its defaults' }
    },
    { label: `in-process store, the image's NODE_OPTIONS in the manifest's ${limit}`, nodeOptions: production.resolved, asImage: true, goal: container },
    { label: `Redis store, the image's NODE_OPTIONS in the manifest's ${limit}`, nodeOptions: production.resolved, asImage: true, redis: { url: redisUrl, keyPrefix: `${keyPrefix}scan:` }, goal: container }
  ]
  const simulator = await startSimulator(group, 0, 'simulator-scan')
  try {
    const results: ScanResult[] = []
    for (const target of targets) {
      log(`scan: ${usernames} distinct usernames, ${concurrency} at a time, ${target.label}${target.nodeOptions === '' ? '' : ` (${target.nodeOptions})`}`)
      const result = await scan({ group, simulator, logLevel, usernames, concurrency, settleSeconds, target })
      log(`  ${result.seconds.toFixed(1)} s; RSS ${mib(result.before.rssBytes)} before, ${mib(result.peak.rssBytes)} at its peak, ${mib(result.settled.rssBytes)} ${settleSeconds} s after;` +
        ` heap used ${mib(result.before.heapUsedBytes)}, ${mib(result.peak.heapUsedBytes)}, ${mib(result.settled.heapUsedBytes)}; statuses ${JSON.stringify(result.statuses)}`)
      results.push(result)
    }
    return results
  } finally {
    await simulator.stop()
  }
}

function mib (bytes: number): string {
  return `${(bytes / MIB).toFixed(0)} MiB`
}
