import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { arch, cpus, loadavg, platform, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildService } from './build.ts'
import { runRound, stopRunningLoad, type RoundResult } from './load.ts'
import { batchVsSingles, hitResponse, shelterRounds, warm, zipfMix } from './phases.ts'
import { ProcessGroup } from './processes.ts'
import { redisTrouble } from './redis-trouble.ts'
import { deleteKeysUnder, assertRedisReachable } from './redis-keys.ts'
import { integerSetting } from './settings.ts'
import { renderReport, summarize, type BenchResults, type TargetSummary } from './report.ts'
import { startBare, startService, startSimulator } from './targets.ts'

// `npm run bench`: one run, on this machine, of what issues 6, 10 and 13 ask to measure. See bench/README.md.

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const RESULT_FILE = join(ROOT, 'bench/results/latest.md')

const settings = {
  upstreamLatencyMs: integerSetting('SIM_LATENCY_MS', 50, 0, 1_000),
  rounds: integerSetting('BENCH_ROUNDS', 5, 1, 20),
  roundSeconds: integerSetting('BENCH_ROUND_SECONDS', 5, 1, 30),
  connections: integerSetting('BENCH_CONNECTIONS', 50, 1, 500),
  logLevel: process.env.BENCH_LOG_LEVEL ?? 'info',
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  warmedUsernames: 100,
  warmUpSeconds: 2,
  shelterRequests: 1_000,
  shelterRounds: integerSetting('BENCH_SHELTER_ROUNDS', 5, 1, 20),
  redisTroubleSeconds: 5,
  zipf: { requests: 20_000, usernames: 10_000, exponent: 1.1, concurrency: 64 },
  listPage: { usernames: 50, pageViews: 100 }
}
/** Start-up, Zipf and the rest take well under three minutes on a busy 2-core machine; the rounds are counted. */
const DEADLINE_MS = 180_000 + 20_000 * settings.shelterRounds + 1_500 * 2 * (settings.redisTroubleSeconds + 3) + 1_500 * settings.roundSeconds * 4 * (settings.rounds + 1)

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
  const machine = machineInfo()
  await assertRedisReachable(settings.redisUrl)
  log('building the service (tsc -p tsconfig.build.json)')
  const buildTypeErrors = buildService(ROOT, log)
  log(`run ${runId}: starting the simulator (${settings.upstreamLatencyMs} ms) and the in-process service instance`)
  const simulator = await startSimulator(group, settings.upstreamLatencyMs)
  const memory = await startService(group, { name: 'service-memory', simulator, logLevel: settings.logLevel })

  log(`Zipf mix: ${settings.zipf.requests} requests over ${settings.zipf.usernames} usernames, in-process store, from cold`)
  const zipfResult = await zipfMix({ service: memory, simulatorUrl: simulator.url, ...settings.zipf })
  const serviceRssBytes = memory.rss()

  const paths = Array.from({ length: settings.warmedUsernames }, (_, index) => `/profile/hit-${index}`)
  log(`warming ${paths.length} usernames on the in-process store`)
  const bodies = await warm(memory, paths)
  // The floors send the hit of median body size, with the headers the load generator received with it.
  const hit = await hitResponse(memory, medianLengthPath(paths, bodies))
  const bareOptions = { body: hit.body, headers: hit.headers, delayMs: settings.upstreamLatencyMs }

  log(`shelter: ${settings.shelterRounds} rounds of ${settings.shelterRequests} concurrent requests for one cold username over two fresh instances,` +
    ' and the same burst against two fresh bare Fastify instances holding each request for the upstream latency')
  const redis = { url: settings.redisUrl, keyPrefix }
  let pairs = 0
  let floorPairs = 0
  const shelter = await shelterRounds({
    rounds: settings.shelterRounds,
    requests: settings.shelterRequests,
    simulatorUrl: simulator.url,
    username: `shelter-${runId}`,
    startPair: async () => {
      pairs++
      return await Promise.all(PAIR.map(async (name) => await startService(group, { name: `service-redis-${pairs}${name}`, simulator, logLevel: settings.logLevel, redis })))
    },
    startFloorPair: async () => {
      floorPairs++
      return await Promise.all(PAIR.map(async (name) => await startBare(group, { ...bareOptions, name: `bare-shelter-${floorPairs}${name}` })))
    }
  })
  // The hit path's Redis instance is one that has served a herd, as a production instance has.
  const [redisA, ...others] = shelter.instances
  if (redisA === undefined) throw new Error('the shelter rounds left no instance running')
  await Promise.all(others.map(async (instance) => await instance.stop()))
  log(`warming ${paths.length} usernames on the Redis store`)
  await warm(redisA, paths)

  log(`a list page: ${settings.listPage.usernames} warm usernames as single requests and as one batch, ${settings.listPage.pageViews} times`)
  const listPage = Array.from({ length: settings.listPage.usernames }, (_, index) => `hit-${index}`)
  const batch = await batchVsSingles({ service: memory, usernames: listPage, pageViews: settings.listPage.pageViews })
  // A burst can leave V8 pretenuring a process's request objects for good (see src/v8-flags.ts): the yardstick gets a process that served none.
  const bare = await startBare(group, bareOptions)

  const targets = {
    bare: { label: 'bare Fastify', server: bare, paths },
    floor: { label: 'floor (bare, a hit\'s bytes)', server: bare, paths: paths.map((path) => `/floor${path}`) },
    redis: { label: 'service, Redis', server: redisA, paths },
    memory: { label: 'service, in-process', server: memory, paths }
  }
  const order = [targets.bare, targets.floor, targets.redis, targets.memory]
  const rounds = new Map(order.map((target): [string, RoundResult[]] => [target.label, []]))
  const load = { connections: settings.connections, seconds: settings.roundSeconds }
  for (const target of order) await runRound(target.server, target.paths, { ...load, seconds: settings.warmUpSeconds })
  for (let round = 1; round <= settings.rounds; round++) {
    for (const target of order) {
      const result = await runRound(target.server, target.paths, load)
      rounds.get(target.label)?.push(result)
      log(`round ${round}/${settings.rounds} ${target.label}: ${Math.round(result.requestsPerSecond)} req/s, p99 ${result.p99Ms.toFixed(2)} ms, ${result.serverCpuUs.toFixed(1)} µs CPU per response`)
    }
  }
  log(`Redis trouble: ${settings.redisTroubleSeconds} s hung, then ${settings.redisTroubleSeconds} s gone, under load, on a redis-server of its own`)
  const troubleResult = await redisTrouble({ group, simulator, logLevel: settings.logLevel, seconds: settings.redisTroubleSeconds })

  const summary = (target: { label: string }): TargetSummary => summarize(target.label, rounds.get(target.label) ?? [])
  const { upstreamLatencyMs, connections, rounds: roundCount, roundSeconds, logLevel, warmedUsernames } = settings
  return {
    machine,
    settings: { upstreamLatencyMs, connections, rounds: roundCount, roundSeconds, logLevel, warmedUsernames, buildTypeErrors },
    hit: { bare: summary(targets.bare), floor: summary(targets.floor), redis: summary(targets.redis), memory: summary(targets.memory) },
    shelter: { requests: settings.shelterRequests, instances: PAIR.length, rounds: shelter.rounds },
    zipf: zipfResult,
    memory: { serviceRssBytes },
    batch,
    redisTrouble: troubleResult
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

function machineInfo (): BenchResults['machine'] {
  return {
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    commit: git(['rev-parse', '--short', 'HEAD']) + (git(['status', '--porcelain']) === '' ? '' : ' (with uncommitted changes)'),
    cores: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    node: process.version,
    platform: `${platform()} ${arch()}`,
    loadAverage: loadavg()
  }
}

function git (args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  } catch {
    return 'unknown'
  }
}

function log (line: string): void {
  process.stdout.write(`[bench] ${line}\n`)
}
