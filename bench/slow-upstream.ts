import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import type { ProcessGroup } from './processes.ts'
import { connectionsTo, countBy, simulatorCounts, stream, type Timed } from './requests.ts'
import { percentile } from './stats.ts'
import { startService, startSimulator } from './targets.ts'

// Issue 32, point 2: an upstream slower than callers like, but within UPSTREAM_TIMEOUT_MS. Distinct cold usernames,
// some at a time, on one fresh instance (in-process store): who got a 200, who a 504, how many calls were sent; then,
// once every call sent has had time to land, the same usernames again: what was stored (HIT) and what costs a new call.

export interface SlowUpstreamCase {
  latencyMs: number
  /** Unset: the service's default. */
  timeoutMs?: number
  callers: number
  concurrency: number
}

export interface AskFigures {
  statuses: Record<string, number>
  xCache: Record<string, number>
  /** The error bodies' codes (e.g. UPSTREAM_TIMEOUT). */
  codes: Record<string, number>
  p50Ms: number
  maxMs: number
  /** Upstream data calls this ask caused (counted once the calls it sent had landed). */
  calls: number
  seconds: number
}

export interface SlowUpstreamRun extends SlowUpstreamCase {
  first: AskFigures
  second: AskFigures
}

export async function slowUpstream (
  { group, logLevel, scenario, name }: { group: ProcessGroup, logLevel: string, scenario: SlowUpstreamCase, name: string }
): Promise<SlowUpstreamRun> {
  const simulator = await startSimulator(group, scenario.latencyMs, `simulator-${name}`)
  const service = await startService(group, {
    name: `service-${name}`,
    simulator,
    logLevel,
    ...(scenario.timeoutMs !== undefined && { env: { UPSTREAM_TIMEOUT_MS: String(scenario.timeoutMs) } })
  })
  const pool = connectionsTo(service.url, scenario.concurrency)
  try {
    const paths = Array.from({ length: scenario.callers }, (_, n) => `/profile/${name}-${n}`)
    const ask = async (): Promise<AskFigures> => {
      const before = (await simulatorCounts(simulator.url)).dataCalls
      const started = performance.now()
      const answers = await stream(pool, paths, scenario.concurrency)
      const seconds = (performance.now() - started) / 1000
      // A call sent for a caller who gave up still lands (and is stored): wait for the last one before counting.
      await sleep(scenario.latencyMs + 500)
      return { ...figures(answers), calls: (await simulatorCounts(simulator.url)).dataCalls - before, seconds }
    }
    const first = await ask()
    const second = await ask()
    return { ...scenario, first, second }
  } finally {
    await pool.close()
    await service.stop()
    await simulator.stop()
  }
}

function errorCode (answer: Timed): string {
  try {
    return String((JSON.parse(answer.body) as { code?: unknown }).code ?? answer.status)
  } catch {
    return String(answer.status)
  }
}

function figures (answers: Timed[]): Omit<AskFigures, 'calls' | 'seconds'> {
  const times = answers.map((answer) => answer.ms).sort((a, b) => a - b)
  return {
    statuses: countBy(answers, (answer) => String(answer.status)),
    xCache: countBy(answers, (answer) => answer.xCache ?? 'none'),
    codes: countBy(answers.filter((answer) => answer.status !== 200), errorCode),
    p50Ms: percentile(times, 50),
    maxMs: times[times.length - 1] ?? Number.NaN
  }
}
