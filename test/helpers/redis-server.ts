import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
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

/** redis-server exited as it started: most often, its port was taken meanwhile. */
class PortLost extends Error {}

/** A redis-server of the test's own (it may be killed and restarted), stopped with the test. */
export class RedisServer {
  readonly port: number
  readonly #args: string[]
  readonly #dir: string
  #process: ChildProcess | undefined

  /** `config`: a configuration file's text, for what only a file can hold (a Sentinel rewrites its own). */
  constructor (port: number, args: string[] = [], config?: string) {
    this.port = port
    this.#dir = mkdtempSync(join(tmpdir(), `pbff-redis-${port}-`))
    const file = join(this.#dir, 'redis.conf')
    if (config !== undefined) writeFileSync(file, config)
    this.#args = [...(config === undefined ? [] : [file]), '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.#dir, ...args]
  }

  get url (): string {
    return `redis://127.0.0.1:${this.port}`
  }

  static async start (t: TestContext, args: string[] = [], port?: number, config?: string): Promise<RedisServer> {
    for (let attempt = 1; ; attempt++) {
      const server = new RedisServer(port ?? await freePort(), args, config)
      t.teardown(() => server.stop().finally(() => server.removeFiles()))
      try {
        await server.start()
        return server
      } catch (error) {
        // A port found free may be taken before redis-server binds it (another process's outgoing connection, say).
        if (port !== undefined || attempt === 3 || !(error instanceof PortLost)) throw error
      }
    }
  }

  async start (): Promise<void> {
    const child = spawn('redis-server', this.#args, { stdio: 'ignore' })
    this.#process = child
    const probe = new Redis(this.port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => 50, maxRetriesPerRequest: 0 })
    probe.on('error', () => {})
    try {
      await eventually(async () => {
        if (child.exitCode !== null) throw new PortLost(`redis-server on ${this.port} exited with ${child.exitCode}`)
        // Redis refusing the PING (NOAUTH, with --requirepass) is Redis answering.
        return await probe.ping().then(() => true, (error: unknown) => error instanceof Error && error.name === 'ReplyError')
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

  /** What `ROLE` names it: `master`, `slave` (a replica) or `sentinel`. */
  async role (): Promise<string> {
    const probe = new Redis(this.port, '127.0.0.1')
    try {
      return String((await probe.role())[0])
    } finally {
      probe.disconnect()
    }
  }

  removeFiles (): void {
    rmSync(this.#dir, { recursive: true, force: true })
  }
}

/**
 * A primary, its replica and three Sentinels watching it as `name` (quorum 2), quick to fail over: the primary is
 * down 500 ms after its last answer. Resolves once the Sentinels know the replica and each other (a failover needs both).
 */
export async function sentinelGroup (t: TestContext, name: string): Promise<{ primary: RedisServer, replica: RedisServer, sentinels: RedisServer[] }> {
  // Without a delay before the first sync (Redis waits 5 s by default, for more replicas to share it).
  const primary = await RedisServer.start(t, ['--repl-diskless-sync-delay', '0'])
  const replica = await RedisServer.start(t, ['--replicaof', '127.0.0.1', String(primary.port)])
  await inSync(replica)
  const config = [
    `sentinel monitor ${name} 127.0.0.1 ${primary.port} 2`,
    `sentinel down-after-milliseconds ${name} 500`,
    `sentinel failover-timeout ${name} 2000`
  ].join('\n')
  const sentinels = await Promise.all([0, 1, 2].map(async () => await RedisServer.start(t, ['--sentinel'], undefined, config)))
  const probe = new Redis(sentinels[0]?.port ?? 0, '127.0.0.1', { maxRetriesPerRequest: 0 })
  probe.on('error', () => {})
  try {
    await eventually(async () => {
      const fields = await probe.call('SENTINEL', 'MASTER', name) as string[]
      const field = (key: string): number => Number(fields[fields.indexOf(key) + 1])
      return field('num-slaves') >= 1 && field('num-other-sentinels') >= 2
    }, 'the Sentinels know the replica and each other')
  } finally {
    probe.disconnect()
  }
  return { primary, replica, sentinels }
}

/**
 * A Redis Cluster of `primaries` shards, each with `replicas` replicas (`redis-cli --cluster create`), whose nodes take
 * `nodeTimeoutMs` to declare a silent node failed. Resolves once every node sees the cluster ok and every replica is in
 * sync with its primary; `primaries` are the servers `ROLE` then names so.
 */
export async function redisCluster (t: TestContext, { primaries = 3, replicas = 0, nodeTimeoutMs = 2000 } = {}): Promise<{ nodes: RedisServer[], primaries: RedisServer[] }> {
  const nodes: RedisServer[] = []
  for (let i = 0; i < primaries * (1 + replicas); i++) {
    const args = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', String(nodeTimeoutMs), '--repl-diskless-sync-delay', '0']
    nodes.push(await RedisServer.start(t, args, await freeClusterPort()))
  }
  await promisify(execFile)('redis-cli', ['--cluster', 'create', ...nodes.map((node) => `127.0.0.1:${node.port}`), '--cluster-replicas', String(replicas), '--cluster-yes'])
  const roles = await Promise.all(nodes.map(async (node) => {
    const probe = new Redis(node.port, '127.0.0.1')
    try {
      await eventually(async () => String(await probe.cluster('INFO')).includes('cluster_state:ok'), `cluster ok on ${node.port}`)
    } finally {
      probe.disconnect()
    }
    const role = await node.role()
    if (role !== 'master') await inSync(node)
    return role
  }))
  return { nodes, primaries: nodes.filter((_, i) => roles[i] === 'master') }
}

/** Once the replica on `server` holds its primary's data (the first sync done): a failover before that would lose it all. */
async function inSync (server: RedisServer): Promise<void> {
  const probe = new Redis(server.port, '127.0.0.1')
  try {
    await eventually(async () => (await probe.info('replication')).includes('master_link_status:up'), `the replica on ${server.port} in sync`)
  } finally {
    probe.disconnect()
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
