import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { budgetPhase } from './budget.ts'
import { buildService } from './build.ts'
import { checkFloor } from './floor-check.ts'
import { hitPathRounds } from './hit-path.ts'
import { assertWrkInstalled, stopRunningLoad } from './load.ts'
import { machineInfo } from './machine.ts'
import { missPhase } from './miss.ts'
import { coherencePhase } from './coherence.ts'
import { batchVsSingles, hitResponse, shelterRounds, warm, zipfMix } from './phases.ts'
import { ProcessGroup, type RunningChild } from './processes.ts'
import { redisTrouble } from './redis-trouble.ts'
import { scanPhase } from './scan.ts'
import { scenariosPhase, SCENARIOS_DEADLINE_MS } from './scenarios.ts'
import { soakPhase } from './soak.ts'
import { tracingPhase } from './tracing.ts'
import { deleteKeysUnder, assertRedisReachable } from './redis-keys.ts'
import { phaseSetting, integerSetting, PHASES } from './settings.ts'
import type { BenchResults } from './results.ts'
import { renderReport } from './render.ts'
import { startBare, startService, startSimulator } from './targets.ts'

// `npm run bench`: one run, on this machine, of what issues 6, 10, 13, 22, 23 and 25 ask to measure. See bench/README.md.

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const RESULT_FILE = join(ROOT, 'bench/results/latest.md')

const settings = {
  phases: phaseSetting('BENCH_PHASES'),
  upstreamLatencyMs: integerSetting('SIM_LATENCY_MS', 50, 0, 1_000),
  rounds: integerSetting('BENCH_ROUNDS', 5, 1, 20),
  misses: integerSetting('BENCH_MISSES', 200, 10, 2_000),
  /** Rounds past BENCH_ROUNDS while fewer than that many were valid for every target (a busy machine). */
  maxRounds: integerSetting('BENCH_MAX_ROUNDS', 8, 1, 30),
  roundSeconds: integerSetting('BENCH_ROUND_SECONDS', 5, 1, 30),
  connections: integerSetting('BENCH_CONNECTIONS', 50, 1, 500),
  logLevel: process.env.BENCH_LOG_LEVEL ?? 'info',
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  warmedUsernames: 100,
  warmUpSeconds: 2,
  shelterRequests: 1_000,
  shelterRounds: integerSetting('BENCH_SHELTER_ROUNDS', 5, 1, 20),
  shelterClients: integerSetting('BENCH_SHELTER_CLIENTS', 1, 1, 1_000),
  redisTroubleSeconds: 5,
  zipf: { requests: 20_000, usernames: 10_000, exponent: 1.1, concurrency: 64 },
  scan: { usernames: integerSetting('BENCH_SCAN_USERNAMES', 100_000, 1_000, 1_000_000), concurrency: 32, settleSeconds: 5 },
  listPage: { usernames: 50, pageViews: 100 },
  budget: {
    seconds: integerSetting('BENCH_BUDGET_SECONDS', 60, 5, 600),
    connections: integerSetting('BENCH_BUDGET_CONNECTIONS', 2_000, 3, 10_000),
    usernames: integerSetting('BENCH_BUDGET_USERNAMES', 100_000, 100, 1_000_000)
  },
  soak: { seconds: integerSetting('BENCH_SOAK_SECONDS', 300, 10, 3_600), usernames: 20_000, connections: 30, freshSeconds: 20, upstreamLatencyMs: 5 }
}
const runs = (phase: typeof PHASES[number]): boolean => settings.phases.includes(phase)
/** Start-up and warming take well under a minute on a busy 2-core machine; each selected phase adds its own bound. */
const DEADLINE_MS = 60_000 +
  (runs('zipf') ? 60_000 : 0) +
  (runs('herd') ? 20_000 * settings.shelterRounds : 0) +
  (runs('list') ? 30_000 : 0) +
  (runs('hit') ? 1_500 * 4 * (settings.warmUpSeconds + settings.roundSeconds * Math.max(settings.rounds, settings.maxRounds)) + 30_000 : 0) +
  // Each miss waits for the upstream four times (through the service, both bare proxies, directly), 20 ms a call: 4 runs, and the instances' start-up.
  (runs('miss') ? 4 * settings.misses * 200 + 30_000 : 0) +
  (runs('trouble') ? 1_500 * 2 * (settings.redisTroubleSeconds + 3) + 20_000 : 0) +
  // Three scans, each at a few thousand usernames a second on a quiet machine: two minutes for 100,000 on a busy one.
  (runs('scan') ? 3 * (120_000 * settings.scan.usernames / 100_000 + 30_000) : 0) +
  // Three instances and a simulator to start, the hot usernames to warm, the load, then its last deadline.
  (runs('budget') ? 1_000 * settings.budget.seconds + 90_000 : 0) +
  // Three instances: their hit rounds, and a thousand misses each per round at 32 at a time over the upstream latency.
  // Three instances to start, then a few thousand requests in sequence.
  (runs('coherence') ? 60_000 : 0) + (runs('scenarios') ? SCENARIOS_DEADLINE_MS : 0) + (runs('soak') ? 1_000 * settings.soak.seconds + 60_000 : 0) +
  (runs('tracing') ? 3 * (1_500 * (settings.warmUpSeconds + settings.roundSeconds * settings.rounds) + 20_000 * settings.rounds) + 30_000 : 0)

/** The herd's instances, and its floor's: two of each. */
const PAIR = ['a', 'b']

const runId = `${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`
const keyPrefix = `pbff-bench:${runId}:`
const logDir = mkdtempSync(join(tmpdir(), 'pbff-bench-'))
const group = new ProcessGroup({ root: ROOT, logDir })

process.on('exit', () => group.killAllNow())
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => { abort(`${signal}: stopping`, 130).catch(() => process.exit(130)) })
setTimeout(() => { abort(`the run took longer than ${DEADLINE_MS / 1000} s: stopping`, 1).catch(() => process.exit(1)) }, DEADLINE_MS).unref()

try {
  const results = await bench()
  const report = renderReport(results)
  mkdirSync(dirname(RESULT_FILE), { recursive: true })
  writeFileSync(RESULT_FILE, report)
  process.stdout.write(`\n${report}\nwritten to bench/results/latest.md\n`)
  rmSync(logDir, { recursive: true, force: true })
} catch (error) {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\nchildren's stderr: ${logDir}\n`)
  process.exitCode = 1
} finally {
  await group.stopAll()
  const deleted = await deleteKeysUnder(settings.redisUrl, keyPrefix).catch(() => 0)
  log(`stopped every process; removed ${deleted} Redis keys under ${keyPrefix}`)
}
// Nothing of ours is left running: leave now rather than wait for idle keep-alive sockets to time out.
process.exit()

async function bench (): Promise<BenchResults> {
  const machine = machineInfo(ROOT)
  if (runs('hit') || runs('tracing') || runs('soak')) assertWrkInstalled()
  await assertRedisReachable(settings.redisUrl)
  log(`phases: ${settings.phases.join(', ')} (BENCH_PHASES)`)
  log('building the service (tsc -p tsconfig.build.json)')
  const buildTypeErrors = buildService(ROOT, log)
  log(`run ${runId}: starting the simulator (${settings.upstreamLatencyMs} ms) and the in-process service instance`)
  const simulator = await startSimulator(group, settings.upstreamLatencyMs)
  const memory = await startService(group, { name: 'service-memory', simulator, logLevel: settings.logLevel })

  let zipf: BenchResults['zipf']
  if (runs('zipf')) {
    log(`Zipf mix: ${settings.zipf.requests} requests over ${settings.zipf.usernames} usernames, in-process store, from cold`)
    zipf = { ...await zipfMix({ service: memory, simulatorUrl: simulator.url, ...settings.zipf }), serviceRssBytes: memory.rss() }
  }

  const paths = Array.from({ length: settings.warmedUsernames }, (_, index) => `/profile/hit-${index}`)
  log(`warming ${paths.length} usernames on the in-process store`)
  const bodies = await warm(memory, paths)
  // The floors send the hit of median body size, with the headers the load generator received with it.
  const hitPath = medianLengthPath(paths, bodies)
  const hit = await hitResponse(memory, hitPath)
  const bareOptions = { body: hit.body, headers: hit.headers, delayMs: settings.upstreamLatencyMs }

  const redis = { url: settings.redisUrl, keyPrefix }
  let shelter: BenchResults['shelter']
  let redisA: RunningChild | undefined
  if (runs('herd')) {
    log(`shelter: ${settings.shelterRounds} rounds of ${settings.shelterRequests} concurrent requests from ${settings.shelterClients} address(es) for one cold username over two fresh instances, and the same burst against two fresh bare Fastify instances holding each request for the upstream latency`)
    let pairs = 0
    let floorPairs = 0
    const herd = await shelterRounds({
      rounds: settings.shelterRounds,
      requests: settings.shelterRequests,
      clients: settings.shelterClients,
      simulatorUrl: simulator.url,
      username: `shelter-${runId}`,
      startPair: async () => {
        pairs++
        const env: Record<string, string> = settings.shelterClients > 1 ? { TRUST_PROXY: 'true' } : {} // X-Forwarded-For names each client
        return await Promise.all(PAIR.map(async (name) => await startService(group, { name: `service-redis-${pairs}${name}`, simulator, logLevel: settings.logLevel, redis, env })))
      },
      startFloorPair: async () => {
        floorPairs++
        return await Promise.all(PAIR.map(async (name) => await startBare(group, { ...bareOptions, name: `bare-shelter-${floorPairs}${name}` })))
      }
    })
    shelter = { requests: settings.shelterRequests, clients: settings.shelterClients, instances: PAIR.length, rounds: herd.rounds }
    // The hit path's Redis instance is one that has served a herd, as a production instance has (not one with TRUST_PROXY on).
    const kept = settings.shelterClients === 1 ? herd.instances[0] : undefined
    await Promise.all(herd.instances.filter((instance) => instance !== kept).map(async (instance) => await instance.stop()))
    redisA = kept
  }

  let batch: BenchResults['batch']
  if (runs('list')) {
    log(`a list page: ${settings.listPage.usernames} warm usernames as single requests and as one batch, ${settings.listPage.pageViews} times`)
    const listPage = Array.from({ length: settings.listPage.usernames }, (_, index) => `hit-${index}`)
    batch = await batchVsSingles({ service: memory, usernames: listPage, pageViews: settings.listPage.pageViews })
  }

  let hitResults: BenchResults['hit']
  if (runs('hit')) {
    redisA ??= await startService(group, { name: 'service-redis', simulator, logLevel: settings.logLevel, redis })
    log(`warming ${paths.length} usernames on the Redis store`)
    await warm(redisA, paths)
    // A burst can leave V8 pretenuring a process's request objects for good (see src/v8-flags.ts): the yardstick gets a process that served none.
    const bare = await startBare(group, bareOptions)
    const floorCheck = await checkFloor({ port: memory.port, path: hitPath }, { port: bare.port, path: `/floor${hitPath}` })
    log(`the floor sends ${floorCheck.floorHeaders.length} headers (a hit: ${floorCheck.hitHeaders.length}), ${floorCheck.floorBytes} bytes (a hit: ${floorCheck.hitBytes}),` +
      ` the same body: ${floorCheck.sameBody}, fresh request ids: ${floorCheck.freshRequestIds}${floorCheck.differingValues.map((value) => `; differs: ${value}`).join('')}`)
    const load = { connections: settings.connections, seconds: settings.roundSeconds, warmUpSeconds: settings.warmUpSeconds }
    hitResults = { ...await hitPathRounds({ bare, redis: redisA, memory, paths, rounds: settings.rounds, maxRounds: settings.maxRounds, load, log }), floorCheck }
  }

  const miss = runs('miss') ? await missPhase({ group, logLevel: settings.logLevel, misses: settings.misses, runId, log }) : undefined

  let trouble: BenchResults['redisTrouble']
  if (runs('trouble')) {
    log(`Redis trouble: ${settings.redisTroubleSeconds} s hung, then ${settings.redisTroubleSeconds} s gone, under load, on a redis-server of its own`)
    trouble = await redisTrouble({ group, simulator, logLevel: settings.logLevel, seconds: settings.redisTroubleSeconds })
  }

  let scan: BenchResults['scan']
  if (runs('scan')) scan = await scanPhase({ group, root: ROOT, logLevel: settings.logLevel, redisUrl: settings.redisUrl, keyPrefix, ...settings.scan, log })

  let budget: BenchResults['budget']
  if (runs('budget')) {
    budget = await budgetPhase({ group, logLevel: settings.logLevel, redisUrl: settings.redisUrl, keyPrefix, upstreamLatencyMs: settings.upstreamLatencyMs, settings: settings.budget, log })
  }

  let tracing: BenchResults['tracing']
  if (runs('tracing')) {
    const load = { connections: settings.connections, seconds: settings.roundSeconds, warmUpSeconds: settings.warmUpSeconds }
    tracing = await tracingPhase({ group, simulator, logLevel: settings.logLevel, paths, rounds: settings.rounds, load, misses: { count: 1_000, concurrency: 32 }, log })
  }

  let coherence: BenchResults['coherence']
  if (runs('coherence')) {
    log('coherence: three instances on the shared Redis, hot usernames purged on each in turn')
    coherence = await coherencePhase({ group, simulator, logLevel: settings.logLevel, redisUrl: settings.redisUrl, keyPrefix })
  }

  const scenarios = runs('scenarios') ? await scenariosPhase({ group, logLevel: settings.logLevel, redisUrl: settings.redisUrl, keyPrefix, log }) : undefined
  const soak = runs('soak') ? await soakPhase({ group, logLevel: settings.logLevel, settings: settings.soak, log }) : undefined

  const { phases, upstreamLatencyMs, connections, rounds: roundCount, roundSeconds, logLevel, warmedUsernames } = settings
  return {
    machine,
    settings: { phases: [...phases], upstreamLatencyMs, connections, rounds: roundCount, roundSeconds, logLevel, warmedUsernames, buildTypeErrors },
    ...(hitResults !== undefined && { hit: hitResults }),
    ...(shelter !== undefined && { shelter }),
    ...(miss !== undefined && { miss }),
    ...(zipf !== undefined && { zipf }),
    ...(batch !== undefined && { batch }),
    ...(trouble !== undefined && { redisTrouble: trouble }),
    ...(scan !== undefined && { scan }),
    ...(budget !== undefined && { budget }),
    ...(tracing !== undefined && { tracing }),
    ...(coherence !== undefined && { coherence }),
    ...(scenarios !== undefined && { scenarios }),
    ...(soak !== undefined && { soak })
  }
}

async function abort (reason: string, exitCode: number): Promise<void> {
  log(reason)
  stopRunningLoad()
  await group.stopAll()
  await deleteKeysUnder(settings.redisUrl, keyPrefix).catch(() => 0)
  process.exit(exitCode)
}

/** The warmed path whose body is of median size. */
function medianLengthPath (paths: string[], bodies: string[]): string {
  const bySize = paths.map((path, index) => ({ path, size: bodies[index]?.length ?? 0 })).sort((a, b) => a.size - b.size)
  return bySize[bySize.length >> 1]?.path ?? paths[0] ?? '/profile/anyone'
}

function log (line: string): void {
  process.stdout.write(`[bench] ${line}\n`)
}
