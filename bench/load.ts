import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import { cacheResults, countedBetween, type CacheResults } from './metrics.ts'
import { machineBusyMs, type CpuTimes } from './processes.ts'

/** Debian's wrk (https://github.com/wg/wrk); WRK_PATH may point at another build. */
const WRK = process.env.WRK_PATH ?? 'wrk'
const SCRIPT = fileURLToPath(new URL('wrk.lua', import.meta.url))
/** What wrk's `done` hook prints before its JSON (see wrk.lua). */
const MARKER = 'PBFF_WRK '
/** Linux reports CPU time in USER_HZ ticks, 100 per second on every mainstream architecture. */
const TICKS_PER_SECOND = 100

export interface LoadOptions {
  connections: number
  seconds: number
  /** Requests per second over all connections, roughly (a pause per connection, see wrkDelayMs); unset: as fast as the target answers. */
  rate?: number
}

/** What wrk's script reports (wrk.lua's `done`): counts, latencies in µs, and wrk's own CPU time in ticks. */
export interface WrkSummary {
  requests: number
  durationUs: number
  bytes: number
  errors: { connect: number, read: number, write: number, status: number, timeout: number }
  latencyUs: { p50: number, p90: number, p99: number, p999: number, max: number, mean: number }
  cpuTicks: number
}

/** One wrk round against one target. */
export interface RoundResult {
  requestsPerSecond: number
  p50Ms: number
  p99Ms: number
  /** Responses wrk completed. */
  responses: number
  /** Connection errors (connect, read, write) and timeouts. */
  errors: number
  /** Responses with a status of 400 or more (wrk counts nothing finer). */
  non2xx: number
  /** For a target that exports metrics: its answers over the round, by status and by X-Cache (see metrics.ts); undefined for bare Fastify. */
  served?: CacheResults
  /** The server's CPU time (every thread of its process) per response, in µs; NaN where unknown. */
  serverCpuUs: number
  /** The server's main thread's CPU time over the round's wall time: 1 is one core, all the request path can use. */
  serverBusy: number
  /** wrk's CPU time (all its threads) over its run's duration: 1 is one core. */
  generatorCpu: number
  /** The rest of the machine's busy time over the round (other processes, the hypervisor's steal), in cores: for the record, not a validity rule. */
  othersCpu: number
}

/** The running wrk, ended by Ctrl-C and by the run's deadline. */
let running: ChildProcess | undefined
export function stopRunningLoad (): void {
  running?.kill('SIGKILL')
}

/** Throws, saying how to install it, when wrk cannot be run. */
export function assertWrkInstalled (wrk = WRK): void {
  const probe = spawnSync(wrk, ['--version'], { encoding: 'utf8', timeout: 5_000 })
  // `wrk --version` prints its banner and exits 1; only a failure to start it means it is missing.
  if (probe.error !== undefined) {
    throw new Error(`the benchmark's load generator, wrk, could not be run (${probe.error.message}): apt-get install wrk (Debian), or set WRK_PATH`)
  }
}

/**
 * Drives `url` for `seconds` with wrk (one thread, `connections` keep-alive connections, each request the next of
 * `paths`), and measures around it: the server's CPU time and main-thread time from /proc, and, for a target with
 * metrics, what it answered (read before and after, outside the measured window).
 */
export async function runRound (
  { url, cpu, metrics = false }: { url: string, cpu?: () => CpuTimes | undefined, metrics?: boolean },
  paths: string[],
  { connections, seconds, rate }: LoadOptions
): Promise<RoundResult> {
  const servedBefore = metrics ? await cacheResults(url) : undefined
  const cpuBefore = cpu?.()
  const machineBefore = machineBusyMs()
  const started = performance.now()
  const summary = await runWrk(url, paths, { connections, seconds, rate })
  const wallMs = performance.now() - started
  const machineAfter = machineBusyMs()
  const cpuAfter = cpu?.()
  const servedAfter = metrics ? await cacheResults(url) : undefined
  const figures = roundFigures(summary)
  const serverMs = cpuBefore === undefined || cpuAfter === undefined ? Number.NaN : cpuAfter.processMs - cpuBefore.processMs
  const mainThreadMs = cpuBefore === undefined || cpuAfter === undefined ? Number.NaN : cpuAfter.mainThreadMs - cpuBefore.mainThreadMs
  const wrkMs = figures.generatorCpu * summary.durationUs / 1000
  return {
    ...figures,
    othersCpu: machineBefore === undefined || machineAfter === undefined ? Number.NaN : Math.max(0, machineAfter - machineBefore - serverMs - wrkMs) / wallMs,
    ...(servedBefore !== undefined && servedAfter !== undefined && { served: countedBetween(servedBefore, servedAfter) }),
    // Over the whole window, wrk's start and exit included: a few ms of 5 s, so a busy share a little low, never high.
    serverCpuUs: serverMs * 1000 / summary.requests,
    serverBusy: mainThreadMs / wallMs
  }
}

/** The figures of one wrk run that need no /proc of the server. */
export function roundFigures (summary: WrkSummary): Pick<RoundResult, 'requestsPerSecond' | 'p50Ms' | 'p99Ms' | 'responses' | 'errors' | 'non2xx' | 'generatorCpu'> {
  const seconds = summary.durationUs / 1e6
  const { connect, read, write, timeout, status } = summary.errors
  return {
    requestsPerSecond: summary.requests / seconds,
    p50Ms: summary.latencyUs.p50 / 1000,
    p99Ms: summary.latencyUs.p99 / 1000,
    responses: summary.requests,
    errors: connect + read + write + timeout,
    non2xx: status,
    generatorCpu: summary.cpuTicks < 0 ? Number.NaN : summary.cpuTicks / TICKS_PER_SECOND / seconds
  }
}

/** The pause before each request of a connection that makes `connections` of them send about `rate` a second: whole ms, 0 for full speed. */
export function wrkDelayMs (connections: number, rate: number | undefined): number {
  if (rate === undefined) return 0
  const delay = Math.round(connections * 1000 / rate)
  // wrk counts in whole milliseconds: at 1 ms or less, the pause would cap the rate rather than set it.
  return delay <= 1 ? 0 : delay
}

/** wrk's JSON line (see wrk.lua) out of everything it printed. */
export function parseWrkOutput (stdout: string): WrkSummary {
  const line = stdout.split('\n').find((candidate) => candidate.startsWith(MARKER))
  if (line === undefined) throw new Error(`wrk printed no summary line:\n${stdout.slice(-1_000)}`)
  const summary = JSON.parse(line.slice(MARKER.length)) as WrkSummary
  if (!(summary.durationUs > 0) || !Number.isInteger(summary.requests)) throw new Error(`wrk's summary makes no sense: ${line}`)
  return summary
}

async function runWrk (url: string, paths: string[], { connections, seconds, rate }: LoadOptions): Promise<WrkSummary> {
  const args = ['-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '10s', '-s', SCRIPT, url, '--', ...paths]
  return await wrkSummary(args, { PBFF_WRK_DELAY_MS: String(wrkDelayMs(connections, rate)) })
}

/** Runs wrk with `args` (a script that prints wrk.lua's summary line) and `env`; stopRunningLoad ends it. */
export async function wrkSummary (args: string[], env: Record<string, string>): Promise<WrkSummary> {
  const child = spawn(WRK, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
  running = child
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk })
  try {
    const exit = await new Promise<{ code: number | null, error?: Error }>((resolve) => {
      child.once('error', (error) => resolve({ code: null, error }))
      child.once('close', (code) => resolve({ code }))
    })
    if (exit.error !== undefined) throw new Error(`wrk could not be run (${exit.error.message}): apt-get install wrk (Debian), or set WRK_PATH`)
    if (exit.code !== 0) throw new Error(`wrk exited with ${exit.code}: ${stderr.slice(-1_000)}${stdout.slice(-1_000)}`)
    return parseWrkOutput(stdout)
  } finally {
    running = undefined
  }
}
