import { randomBytes } from 'node:crypto'
import { mkdtempSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { profileOf } from '../dev/profiles.ts'
import { buildService } from './build.ts'
import { assertWrkInstalled, runRound, stopRunningLoad } from './load.ts'
import { hitResponse, warm } from './phases.ts'
import { ProcessGroup, type RunningChild } from './processes.ts'
import { deleteKeysUnder, assertRedisReachable } from './redis-keys.ts'
import { integerSetting } from './settings.ts'
import { startBare, startService, startSimulator } from './targets.ts'

// `npm run bench:profile [-- bare|floor|memory|redis ...]`: the hit path under load with `node --cpu-prof`,
// on bare Fastify, on the floor (bare Fastify sending a hit's bytes) and on the service with each store. It prints where each .cpuprofile is: open it in
// Chrome DevTools (Performance tab, "Load profile") to see where the CPU time goes.

const ROOT = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '')
const SECONDS = 10
const CONNECTIONS = 50
/**
 * Below saturation on purpose: a saturated service sheds load (503), and a profile of shedding says
 * nothing about a hit. At a fixed rate, busy time per request is what one hit costs. The rate is approximate
 * (wrk pauses each connection CONNECTIONS / RATE s between requests; above 50,000, no pause: full speed).
 */
const RATE = integerSetting('BENCH_PROFILE_RATE', 2_000, 1, 100_000)
const DEADLINE_MS = 180_000
const TARGETS = ['bare', 'floor', 'memory', 'redis']
const targets = process.argv.slice(2).filter((arg) => TARGETS.includes(arg))
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const keyPrefix = `pbff-bench-profile:${Date.now().toString(36)}-${randomBytes(3).toString('hex')}:`
const workDir = mkdtempSync(join(tmpdir(), 'pbff-profile-'))
const group = new ProcessGroup({ root: ROOT, logDir: workDir })

process.on('exit', () => group.killAllNow())
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => { stop(130) })
setTimeout(() => { stop(1) }, DEADLINE_MS).unref()

try {
  assertWrkInstalled()
  buildService(ROOT, (line) => process.stdout.write(`${line}\n`))
  const simulator = await startSimulator(group, 50)
  const paths = Array.from({ length: 100 }, (_, index) => `/profile/hit-${index}`)
  for (const target of targets.length > 0 ? targets : TARGETS) {
    const dir = join(workDir, target)
    const nodeArgs = ['--cpu-prof', '--cpu-prof-dir', dir]
    let server: RunningChild
    let targetPaths = paths
    if (target === 'bare') {
      // The yardstick under the same load: what any Node process pays to answer these requests.
      server = await startBare(group, { body: JSON.stringify({ user: profileOf('hit-0') }), delayMs: 0, nodeArgs })
    } else if (target === 'floor') {
      const service = await startService(group, { name: 'service-for-floor', simulator, logLevel: 'info' })
      await warm(service, paths)
      const hit = await hitResponse(service, paths[0] as string)
      await service.stop()
      server = await startBare(group, { body: hit.body, headers: hit.headers, delayMs: 0, nodeArgs })
      targetPaths = paths.map((path) => `/floor${path}`)
    } else {
      if (target === 'redis') await assertRedisReachable(redisUrl)
      server = await startService(group, {
        name: `service-${target}`,
        simulator,
        logLevel: process.env.BENCH_LOG_LEVEL ?? 'info',
        ...(target === 'redis' && { redis: { url: redisUrl, keyPrefix } }),
        nodeArgs
      })
      await warm(server, paths)
    }
    const round = await runRound({ url: server.url, cpu: server.cpu, metrics: target === 'memory' || target === 'redis' }, targetPaths, { connections: CONNECTIONS, seconds: SECONDS, rate: RATE })
    // The profile is written when the process exits; SIGTERM makes it close and exit normally.
    await server.stop()
    const file = readdirSync(dir).find((name) => name.endsWith('.cpuprofile'))
    if (file === undefined) throw new Error(`no .cpuprofile in ${dir}`)
    const served = round.served === undefined ? `status >= 400: ${round.non2xx}` : `statuses ${JSON.stringify(round.served.statuses)}, X-Cache ${JSON.stringify(round.served.xCache)}`
    process.stdout.write(`${target}: ${Math.round(round.requestsPerSecond)} req/s, ${round.serverCpuUs.toFixed(1)} µs CPU per response (${served}), wrk ${Math.round(round.generatorCpu * 100)}% of a core, ` +
      `${Math.round(round.requestsPerSecond * SECONDS)} requests in ${SECONDS} s: ${join(dir, file)}\n`)
  }
} catch (error) {
  process.stderr.write(`profile failed: ${(error as Error).stack ?? String(error)}\nchildren's stderr: ${workDir}\n`)
  process.exitCode = 1
} finally {
  await group.stopAll()
  await deleteKeysUnder(redisUrl, keyPrefix).catch(() => 0)
}
process.exit()

function stop (exitCode: number): void {
  stopRunningLoad()
  group.stopAll().finally(() => process.exit(exitCode))
}
