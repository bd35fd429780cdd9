import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Pool } from 'undici'
import { warm } from './phases.ts'
import { OwnRedis } from './own-redis.ts'
import type { ProcessGroup } from './processes.ts'
import type { BenchResults } from './results.ts'
import { connectionsTo, simulatorCounts, timedGet } from './requests.ts'
import { percentile } from './stats.ts'
import { startService, type Simulator } from './targets.ts'

const USERNAMES = 100
const CONCURRENCY = 16
/** Traffic before the trouble starts, and after it ends. */
const BEFORE_MS = 1_000
const AFTER_MS = 2_000

interface Sample { startedAt: number, ms: number, status: number }

/**
 * Redis trouble under load, on a redis-server of the phase's own (the shared one is never paused):
 * `seconds` of a hang (SIGSTOP) with 1 request in 10 for a new username, then `seconds` of an outage
 * (SIGKILL) over warmed usernames, and a restart.
 */
export async function redisTrouble (
  { group, simulator, logLevel, seconds }: { group: ProcessGroup, simulator: Simulator, logLevel: string, seconds: number }
): Promise<NonNullable<BenchResults['redisTrouble']>> {
  const redis = await OwnRedis.start()
  const service = await startService(group, { name: 'service-redis-trouble', simulator, logLevel, redis: { url: redis.url, keyPrefix: 'pbff-bench-trouble:' } })
  const pool = connectionsTo(service.url, CONCURRENCY)
  try {
    const hot = Array.from({ length: USERNAMES }, (_, index) => `/profile/trouble-${index}`)
    await warm(service, hot)
    let next = 0
    const mixed = (): string => next++ % 10 === 0 ? `/profile/trouble-new-${next}` : hot[next % USERNAMES] as string

    const hang = drive(pool, mixed)
    await sleep(BEFORE_MS)
    const pausedAt = performance.now()
    redis.signal('SIGSTOP')
    await sleep(seconds * 1000)
    const resumedAt = performance.now()
    redis.signal('SIGCONT')
    await sleep(AFTER_MS)
    const hangSamples = await hang.stop()
    // In flight at any moment of the hang: the first detection is paid by requests already under way.
    const during = hangSamples.filter((sample) => sample.startedAt + sample.ms >= pausedAt && sample.startedAt < resumedAt)
    const after = hangSamples.filter((sample) => sample.startedAt >= resumedAt)

    const before = await simulatorCounts(simulator.url)
    redis.signal('SIGKILL')
    const outage = drive(pool, () => hot[next++ % USERNAMES] as string)
    await sleep(seconds * 1000)
    const outageSamples = await outage.stop()
    const atReturn = await simulatorCounts(simulator.url)
    await redis.restart()
    const back = drive(pool, () => hot[next++ % USERNAMES] as string)
    await sleep(AFTER_MS)
    await back.stop()
    const end = await simulatorCounts(simulator.url)
    const calls = hot.map((path) => {
      const key = `profile:${path.slice('/profile/'.length)}`
      return (atReturn.calls[key] ?? 0) - (before.calls[key] ?? 0)
    })
    return {
      seconds,
      usernames: USERNAMES,
      hang: {
        requests: during.length,
        errors: during.filter((sample) => sample.status !== 200).length,
        p50Ms: percentile(during.map((sample) => sample.ms), 50),
        p99Ms: percentile(during.map((sample) => sample.ms), 99),
        maxMs: Math.max(...during.map((sample) => sample.ms)),
        afterMaxMs: Math.max(...after.map((sample) => sample.ms))
      },
      outage: {
        requests: outageSamples.length,
        errors: outageSamples.filter((sample) => sample.status !== 200).length,
        maxCallsPerUsername: Math.max(...calls),
        callsAfterReturn: end.dataCalls - atReturn.dataCalls
      }
    }
  } finally {
    await pool.close()
    await service.stop()
    redis.stop()
  }
}

/** Requests from `pathFor`, CONCURRENCY at a time, until stopped. */
function drive (pool: Pool, pathFor: () => string): { stop: () => Promise<Sample[]> } {
  const samples: Sample[] = []
  const state = { running: true }
  const worker = async (): Promise<void> => {
    while (state.running) {
      const startedAt = performance.now()
      const { status, ms } = await timedGet(pool, pathFor())
      samples.push({ startedAt, ms, status })
    }
  }
  const workers = Array.from({ length: CONCURRENCY }, worker)
  return {
    stop: async () => {
      state.running = false
      await Promise.all(workers)
      return samples
    }
  }
}
