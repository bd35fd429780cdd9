import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { eventually, type TestContext } from './clock.ts'

export async function freePort (): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

/** A redis-server of the test's own (it may be killed and restarted), stopped with the test. */
export class RedisServer {
  readonly port: number
  readonly #args: string[]
  readonly #dir: string
  #process: ChildProcess | undefined

  constructor (port: number, args: string[] = []) {
    this.port = port
    this.#dir = mkdtempSync(join(tmpdir(), `pbff-redis-${port}-`))
    this.#args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.#dir, ...args]
  }

  get url (): string {
    return `redis://127.0.0.1:${this.port}`
  }

  static async start (t: TestContext, args: string[] = [], port?: number): Promise<RedisServer> {
    const server = new RedisServer(port ?? await freePort(), args)
    t.teardown(() => server.stop().finally(() => server.removeFiles()))
    await server.start()
    return server
  }

  async start (): Promise<void> {
    const child = spawn('redis-server', this.#args, { stdio: 'ignore' })
    this.#process = child
    const probe = new Redis(this.port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => 50, maxRetriesPerRequest: 0 })
    probe.on('error', () => {})
    try {
      await eventually(async () => {
        if (child.exitCode !== null) throw new Error(`redis-server on ${this.port} exited with ${child.exitCode}`)
        return await probe.ping().then(() => true, () => false)
      }, `redis-server on ${this.port}`)
    } finally {
      probe.disconnect()
    }
  }

  /** SIGSTOP: a hang (connections stay open, nothing answers) until `resume`. */
  pause (): void {
    this.#process?.kill('SIGSTOP')
  }

  resume (): void {
    this.#process?.kill('SIGCONT')
  }

  /** SIGKILL: an outage, not a shutdown. */
  async stop (): Promise<void> {
    const child = this.#process
    this.#process = undefined
    if (child === undefined || child.exitCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGKILL')
    await exited
  }

  removeFiles (): void {
    rmSync(this.#dir, { recursive: true, force: true })
  }
}

/** Whether a program can be run here (the cluster test needs redis-cli). */
export function available (command: string): boolean {
  return spawnSync(command, ['--version']).status === 0
}

/** A port free for a cluster node: it and its cluster bus port (+10000) both. */
export async function freeClusterPort (): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 20_000)
    if (await isFree(port) && await isFree(port + 10_000)) return port
  }
  throw new Error('no free port pair for a cluster node')
}

async function isFree (port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}
