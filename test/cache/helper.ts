import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { Cluster, Redis } from 'ioredis'
import { buildApp } from '../../src/app.js'
import type { Config } from '../../src/config.js'
import type { SimulatorOptions, Simulator } from '../../dev/simulator.js'
import { simulator, testConfig, type TestContext } from '../helper.js'

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

/** A clock the test moves: entries age without anyone sleeping. */
export class Clock {
  #now = Date.now()
  readonly now = (): number => this.#now
  advance (seconds: number): void {
    this.#now += seconds * 1000
  }
}

export interface CacheStack {
  app: FastifyInstance
  sim: Simulator
  config: Config
  clock: Clock
  /** Another instance of the same deployment: same simulator, Redis, key prefix and clock. */
  another: () => Promise<FastifyInstance>
}

export interface CacheStackOptions {
  env?: Record<string, string>
  sim?: SimulatorOptions
  /** Default true: return once Redis and its pub/sub are connected. */
  waitForRedis?: boolean
}

/** An app on the shared Redis (unless `env` says otherwise) with a clock of its own, before a fresh simulator. */
export async function cacheStack (t: TestContext, { env = {}, sim: simOptions, waitForRedis = true }: CacheStackOptions = {}): Promise<CacheStack> {
  const sim = await simulator(t, simOptions)
  const config = testConfig(sim, { REDIS_URL, ...env })
  const clock = new Clock()
  let instances = 0
  const build = async (): Promise<FastifyInstance> => {
    const app = await buildApp({ config, now: clock.now })
    t.teardown(() => app.close())
    if (waitForRedis) await untilRedisReady(app, ++instances)
    return app
  }
  return { app: await build(), sim, config, clock, another: build }
}

/**
 * Start-up never waits for Redis; a test that means to use it does: until Redis is up and the
 * deployment's channel has `instances` subscribers (each instance subscribes once it is connected).
 */
export async function untilRedisReady (app: FastifyInstance, instances = 1): Promise<void> {
  const { redis } = app
  if (redis === undefined) return
  await eventually(() => app.redisLayer?.health.up === true, 'redis up')
  const channel = `${app.config.CACHE_KEY_PREFIX}v1:events`
  // On a cluster each node counts its own subscribers.
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis]
  await eventually(async () => {
    const counts = await Promise.all(nodes.map(async (node) => (await node.pubsub('NUMSUB', channel) as [string, number])[1]))
    return counts.reduce((sum, count) => sum + count, 0) >= instances
  }, 'subscribed')
}

/** Waits for something another task does (a background revalidation, a reconnection), within a bound. */
export async function eventually (check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`)
    await sleep(10)
  }
}

/** A raw client on the shared Redis, for looking at keys; quit with the test. */
export function rawRedis (t: TestContext, url = REDIS_URL): Redis {
  const redis = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 1 })
  t.teardown(() => redis.quit().catch(() => redis.disconnect()))
  return redis
}

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
