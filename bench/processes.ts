import { spawn, type ChildProcess } from 'node:child_process'
import { closeSync, openSync, readFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { request } from 'undici'

/** Everything the benchmark starts listens on loopback only. */
export const HOST = '127.0.0.1'

const READY_TIMEOUT_MS = 30_000
const READY_POLL_MS = 100
/** SIGTERM, then this long for a graceful close (a --cpu-prof child writes its profile then), then SIGKILL. */
const STOP_GRACE_MS = 15_000
/** Preloaded into every child: it listens on port 0 and reports the port it got (see report-port.ts). */
const REPORT_PORT = ['--import', './bench/report-port.ts']

export interface ChildSpec {
  name: string
  /** Arguments to `node`, run from the repository root, e.g. `['dist/server.js']`. */
  args: string[]
  /** The child's whole environment; it is to listen on port 0. */
  env: Record<string, string>
  /** Polled until it answers 200; the child counts as started then. */
  readyPath: string
}

export interface RunningChild {
  name: string
  pid: number
  port: number
  url: string
  /** Resident set size in bytes, read from /proc (Linux); undefined elsewhere. */
  rss: () => number | undefined
  /** The resident set now and at its peak so far, read from /proc (Linux); undefined elsewhere. */
  memory: () => ResidentMemory | undefined
  /** CPU time used so far, read from /proc (Linux); undefined elsewhere. */
  cpu: () => CpuTimes | undefined
  stop: () => Promise<void>
}

/** CPU time (user + system) used so far, in ms. */
export interface CpuTimes {
  /** Every thread of the process: the main thread, V8's GC helpers, libuv's pool. */
  processMs: number
  /** The main thread alone: the one that runs the event loop, so every request. */
  mainThreadMs: number
}

/** VmRSS and VmHWM, in bytes. */
export interface ResidentMemory {
  rssBytes: number
  peakRssBytes: number
}

/**
 * The children of one benchmark run, each in its own process. Whatever happens to the run (an error, a
 * timeout, Ctrl-C), `stopAll` ends every one of them; `killAllNow` is the synchronous last resort for
 * the parent's `exit` event.
 */
export class ProcessGroup {
  readonly #children = new Set<ChildProcess>()
  readonly #root: string
  readonly #logDir: string

  /** `logDir` receives each child's stderr (start-up failures); stdout, the request log, is discarded. */
  constructor ({ root, logDir }: { root: string, logDir: string }) {
    this.#root = root
    this.#logDir = logDir
  }

  /** Starts the child, on the port it reports, and waits until `readyPath` answers 200. */
  async start (spec: ChildSpec): Promise<RunningChild> {
    const logPath = join(this.#logDir, `${spec.name}.stderr.log`)
    const stderr = openSync(logPath, 'w')
    const child = spawn(process.execPath, [...REPORT_PORT, ...spec.args], {
      cwd: this.#root,
      env: spec.env,
      stdio: ['ignore', 'ignore', stderr, 'ipc']
    })
    closeSync(stderr)
    this.#children.add(child)
    const exited = new Promise<void>((resolve) => child.once('exit', () => {
      this.#children.delete(child)
      resolve()
    }))
    try {
      const port = await reportedPort(child, exited)
      const url = `http://${HOST}:${port}`
      await waitReady(`${url}${spec.readyPath}`, exited)
      const pid = child.pid as number
      return {
        name: spec.name,
        pid,
        port,
        url,
        rss: () => residentMemory(pid)?.rssBytes,
        memory: () => residentMemory(pid),
        cpu: () => cpuTimes(pid),
        stop: async () => await stopChild(child, exited)
      }
    } catch (error) {
      await stopChild(child, exited)
      const log = await readFile(logPath, 'utf8').catch(() => '')
      throw new Error(`${spec.name} did not start: ${(error as Error).message}\n${log.slice(-2_000)}`)
    }
  }

  async stopAll (): Promise<void> {
    await Promise.all([...this.#children].map(async (child) => {
      await stopChild(child, new Promise((resolve) => child.once('exit', () => resolve())))
    }))
  }

  killAllNow (): void {
    for (const child of this.#children) child.kill('SIGKILL')
  }
}

async function reportedPort (child: ChildProcess, exited: Promise<void>): Promise<number> {
  const reported = new Promise<number>((resolve) => {
    child.once('message', (message: { port?: unknown }) => { if (typeof message.port === 'number') resolve(message.port) })
  })
  const timeout = sleep(READY_TIMEOUT_MS, 'timeout' as const, { ref: false })
  const port = await Promise.race([reported, exited.then(() => 'exited' as const), timeout])
  if (typeof port === 'number') return port
  throw new Error(port === 'exited' ? 'the process exited' : `no port reported within ${READY_TIMEOUT_MS} ms`)
}

async function waitReady (url: string, exited: Promise<void>): Promise<void> {
  let gone = false
  exited.then(() => { gone = true }, () => {})
  const deadline = Date.now() + READY_TIMEOUT_MS
  while (Date.now() < deadline) {
    if (gone) throw new Error('the process exited')
    const status = await request(url, { headersTimeout: 1_000, bodyTimeout: 1_000 })
      .then(async (response) => { await response.body.dump(); return response.statusCode }, () => 0)
    if (status === 200) return
    await sleep(READY_POLL_MS)
  }
  throw new Error(`no 200 from ${url} within ${READY_TIMEOUT_MS} ms`)
}

async function stopChild (child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  child.kill('SIGTERM')
  // Unreferenced: a child that exits at once must not leave the parent waiting out the grace period.
  const timer = sleep(STOP_GRACE_MS, 'timeout' as const, { ref: false })
  if (await Promise.race([exited.then(() => 'exited' as const), timer]) === 'timeout') {
    child.kill('SIGKILL')
    await exited
  }
}

/** Linux reports CPU time in USER_HZ ticks, 100 per second on every mainstream architecture. */
const MS_PER_TICK = 10

export function cpuTimes (pid: number): CpuTimes | undefined {
  try {
    return {
      processMs: statCpuMs(readFileSync(`/proc/${pid}/stat`, 'utf8')),
      mainThreadMs: statCpuMs(readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8'))
    }
  } catch {
    return undefined
  }
}

/** The CPU time every core of the machine spent busy so far (user, nice, system, irq, softirq, steal), in ms; undefined without /proc. */
export function machineBusyMs (): number | undefined {
  try {
    return busyMsOfProcStat(readFileSync('/proc/stat', 'utf8'))
  } catch {
    return undefined
  }
}

/** The busy time of /proc/stat's first line (all cores), in ms: everything but idle and iowait. */
export function busyMsOfProcStat (stat: string): number {
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = (stat.split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number)
  return (user + nice + system + irq + softirq + steal) * MS_PER_TICK
}

/** utime + stime of a /proc stat line, in ms. */
export function statCpuMs (stat: string): number {
  // Fields after the command name (which may hold spaces, hence the last ')'): utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) * MS_PER_TICK
}

function residentMemory (pid: number): ResidentMemory | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const kib = (field: string): number | undefined => {
      const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status)
      return match?.[1] === undefined ? undefined : Number(match[1]) * 1024
    }
    const rssBytes = kib('VmRSS')
    const peakRssBytes = kib('VmHWM')
    return rssBytes === undefined || peakRssBytes === undefined ? undefined : { rssBytes, peakRssBytes }
  } catch {
    return undefined
  }
}
