// What a refused miss costs in CPU, beside a warm hit: `npx tsx bench/refusal.ts [requests]` (Redis at REDIS_URL).
// Each case builds an app in this process (in-process store, then Redis) on a clock that stands still, so a failure's
// back-off lasts the whole run, and sends `requests` requests for distinct cold usernames through `app.inject`, one
// event-loop turn each, after as many unmeasured ones (5,000 cold ones still cost 1.5-2 times the steady figure).
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { buildApp } from '../src/app.ts'
import { loadConfig } from '../src/config.ts'
import { serviceEnv } from '../dev/service-env.ts'
import { startSimulator, type Simulator } from '../dev/simulator.ts'
import type { FastifyInstance } from 'fastify'

const REQUESTS = Number(process.argv[2] ?? 20_000)
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

async function appFor (sim: Simulator, env: Record<string, string>, now: () => number): Promise<FastifyInstance> {
  const config = loadConfig({
    ...serviceEnv(sim),
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_MINUTE: '0',
    CACHE_KEY_PREFIX: `pbff-bench:${randomUUID()}:`,
    ...env
  })
  return await buildApp({ config, now, loadShedding: { maxEventLoopDelay: 0 } })
}

/** CPU (user + system) per request, in µs, and the statuses seen. */
async function measure (app: FastifyInstance, paths: string[]): Promise<{ us: number, statuses: Record<string, number> }> {
  const statuses: Record<string, number> = {}
  const before = process.cpuUsage()
  for (const path of paths) {
    const { statusCode, body } = await app.inject(path)
    const key = statusCode === 200 ? '200' : `${statusCode} ${(JSON.parse(body) as { code: string }).code}`
    statuses[key] = (statuses[key] ?? 0) + 1
    // A turn of the event loop, as between a server's requests: an answer made without I/O (in-process) would
    // otherwise never let its request's pending immediates run, and thousands of requests' objects piled up for GC.
    await new Promise((resolve) => setImmediate(resolve))
  }
  const used = process.cpuUsage(before)
  return { us: (used.user + used.system) / paths.length, statuses }
}

/** CPU per HGETALL of an absent key, one after another, on a client of its own (the store's read of a cold key). */
async function readCost (redis: Redis): Promise<number> {
  const keys = Array.from({ length: REQUESTS }, (_, i) => `pbff-bench:absent:${randomUUID()}:${i}`)
  for (const key of keys.slice(0, 500)) await redis.hgetall(key)
  const before = process.cpuUsage()
  for (const key of keys) await redis.hgetall(key)
  const used = process.cpuUsage(before)
  return (used.user + used.system) / keys.length
}

const cold = (tag: string): string[] => Array.from({ length: REQUESTS }, (_, i) => `/profile/${tag}-${randomUUID()}-${i}`)

async function main (): Promise<void> {
  const sim = await startSimulator({})
  const frozen = Date.now()
  const now = (): number => frozen
  const redis = new Redis(REDIS_URL)
  for (const [store, env] of [['in-process', {}], ['Redis', { REDIS_URL }]] as const) {
    // The baseline: the same count answered from a warm entry (loaded once, then read).
    const warmApp = await appFor(sim, env, now)
    const warm = cold('warm')
    await measure(warmApp, warm)
    const hit = await measure(warmApp, warm)
    await warmApp.close()

    // No token: the identity provider fails, and the back-off never ends on this clock.
    sim.failTokenNext({ kind: 'status', status: 503 }, 10)
    const failing = await appFor(sim, env, now)
    await failing.inject('/profile/first')
    // As many refusals first, so that the figure is the refusal's, not the compiler's warming up to it.
    await measure(failing, cold('no-token-warm'))
    const noToken = await measure(failing, cold('no-token'))
    await failing.close()
    sim.reset()

    for (const [label, result] of [['warm hit', hit], ['no-token', noToken]] as const) {
      console.log(`${store.padEnd(10)} ${label.padEnd(9)} ${result.us.toFixed(1).padStart(7)} µs CPU/request  ${JSON.stringify(result.statuses)}`)
    }
    if (store === 'Redis') {
      // The goal is the refusal's cost beyond the one read that shows whether a stale entry exists: that read alone.
      const readUs = await readCost(redis)
      console.log(`${store.padEnd(10)} ${'one read'.padEnd(9)} ${readUs.toFixed(1).padStart(7)} µs CPU (HGETALL of an absent key, as the store reads)`)
      console.log(`${store.padEnd(10)} ${'beyond it'.padEnd(9)} ${(noToken.us - readUs).toFixed(1).padStart(7)} µs CPU/refusal`)
    }
  }
  // The apps' keys (each app's own prefix) go with the run.
  for await (const keys of redis.scanStream({ match: 'pbff-bench:*', count: 1000 })) if ((keys as string[]).length > 0) await redis.del(...(keys as string[]))
  await redis.quit()
  await sim.close()
}

await main()
