import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { HOST } from './processes.ts'

const READY_TIMEOUT_MS = 10_000

/** A redis-server of the phase's own, on a free port, without persistence; killed whatever happens to the run. */
export class OwnRedis {
  readonly url: string
  readonly #port: number
  readonly #dir = mkdtempSync(join(tmpdir(), 'pbff-bench-redis-'))
  #child: ChildProcess | undefined
  readonly #killOnExit = (): void => { this.#child?.kill('SIGKILL') }

  private constructor (port: number) {
    this.#port = port
    this.url = `redis://${HOST}:${port}`
    process.once('exit', this.#killOnExit)
  }

  /** redis-server cannot report a port it chose, and is restarted on the same one: a port the kernel just freed. */
  static async start (): Promise<OwnRedis> {
    const redis = new OwnRedis(await freePort())
    await redis.restart()
    return redis
  }

  async restart (): Promise<void> {
    this.#child = spawn('redis-server', ['--port', String(this.#port), '--bind', HOST, '--save', '', '--appendonly', 'no', '--dir', this.#dir], { stdio: 'ignore' })
    const probe = new Redis(this.#port, HOST, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => 50 })
    probe.on('error', () => {})
    const deadline = performance.now() + READY_TIMEOUT_MS
    try {
      while (!await probe.ping().then(() => true, () => false)) {
        if (performance.now() > deadline) throw new Error(`redis-server on ${this.#port} did not answer`)
        await sleep(50)
      }
    } finally {
      probe.disconnect()
    }
  }

  signal (signal: NodeJS.Signals): void {
    this.#child?.kill(signal)
  }

  stop (): void {
    this.#killOnExit()
    process.removeListener('exit', this.#killOnExit)
    rmSync(this.#dir, { recursive: true, force: true })
  }
}

async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, HOST, resolve)
  })
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}
