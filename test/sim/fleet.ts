import type { FastifyInstance } from 'fastify'
import { Redis } from 'ioredis'
import type { Simulator } from '../../dev/simulator.ts'
import { anotherApp, eventually, HostClock, simulator, testConfig, type RedisServer, type TestContext } from '../helper.ts'
import { eventsChannel } from '../../src/cache/keys.ts'
import { RESOURCES } from '../../src/resources.ts'
import { COPY_MS } from './invariants.ts'
import type { Schedule } from './schedule.ts'

// Three instances on one Redis the schedule controls, before one upstream simulator that marks every answer with
// the call it came from: what the invariants are checked against.

const ADMIN_TOKEN = 'fleet-sim-admin-token'
/** Above the Redis command timeout (500 ms), so a hang's first detection leaves time to answer; a purge is then remembered 10 s (load-budget.ts). */
const UPSTREAM_TIMEOUT_MS = 2_000
const PURGE_MEMORY_MS = 2 * (2 * UPSTREAM_TIMEOUT_MS + 1_000)

/** One upstream call, on the deployment's clock. */
export interface Call {
  kind: 'profile' | 'timeline' | 'user'
  username: string
  at: number
  /** The member's version when it was made: purges bump it. */
  version: number
  /** Pauses of Redis before it: a pause re-measures every instance's offset to Redis's clock (see `Fleet.pause`). */
  pauses: number
}

/** `version`: what the purge bumped its member to; a body of an older one is from before it. */
export interface Purge { username: string, version: number, at: number, status: number, busLost: boolean }

/** Deployment-clock spans while Redis was away, each instance then on its own. */
export interface Outage { from: number, to: number | undefined }

export class Fleet {
  readonly clock = new HostClock()
  readonly calls: Call[] = []
  readonly purges: Purge[] = []
  readonly outages: Outage[] = []
  readonly versions = new Map<string, number>()
  readonly startedAt = this.clock.now()
  /** Restarts and flushes: Redis came back without what it held. */
  failovers = 0
  /** When the budget changed hands (deployment clock): Redis lost, back, or emptied; each instance's own bucket took over or gave back. */
  readonly budgetSwitches: number[] = []
  pauses = 0
  busLost = false
  apps: FastifyInstance[] = []
  sim!: Simulator
  prefix = ''
  readonly #redis: RedisServer
  readonly #admin: Redis
  /** Per instance, how often it came up on Redis and measured its offset to Redis's clock anew (the moved clock's advances then drop out of it). */
  readonly resyncs: number[] = []
  /** Per instance, the purge events it heard, by username. */
  #purgesHeard: Array<Map<string, number>> = []

  constructor (t: TestContext, redis: RedisServer) {
    this.#redis = redis
    this.#admin = new Redis(redis.url, { maxRetriesPerRequest: 0 })
    this.#admin.on('error', () => {})
    t.teardown(() => { this.#admin.disconnect() })
  }

  static async start (t: TestContext, redis: RedisServer, { settings }: Schedule): Promise<Fleet> {
    const fleet = new Fleet(t, redis)
    fleet.sim = await simulator(t, { now: fleet.clock.now, mark: (call) => fleet.#marked(call) })
    const config = testConfig(t, fleet.sim, {
      REDIS_URL: redis.url,
      ADMIN_TOKEN,
      PROFILE_TTL_SECONDS: String(settings.profileTtlS),
      TIMELINE_TTL_SECONDS: String(settings.timelineTtlS),
      UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS),
      // Every request comes from one address: the per-client limit is not what this checks.
      RATE_LIMIT_PER_MINUTE: '0',
      ...(process.env.SIM_LOG_LEVEL !== undefined && { LOG_LEVEL: process.env.SIM_LOG_LEVEL }),
      ...(settings.maxRps !== undefined && { UPSTREAM_MAX_RPS: String(settings.maxRps), UPSTREAM_EXPECTED_INSTANCES: String(settings.skewsMs.length) })
    })
    fleet.prefix = config.CACHE_KEY_PREFIX
    fleet.apps = await Promise.all(settings.skewsMs.map(async (skewMs) => await anotherApp(t, config, () => fleet.clock.now() + skewMs)))
    fleet.apps.forEach((app, index) => {
      fleet.resyncs[index] = 0
      app.redisLayer?.health.listen((up) => { if (up) fleet.resyncs[index] = (fleet.resyncs[index] ?? 0) + 1 })
    })
    fleet.#purgesHeard = fleet.apps.map((app) => {
      const heard = new Map<string, number>()
      app.redisLayer?.bus.listen((event) => {
        const username = event.type === 'staled' ? /\{(.*)\}/.exec(event.key)?.[1] : undefined
        if (username !== undefined) heard.set(decodeURIComponent(username), (heard.get(decodeURIComponent(username)) ?? 0) + 1)
      })
      return heard
    })
    await fleet.untilShared()
    return fleet
  }

  /** The body's mark: the member's version and the call's index. */
  #marked ({ kind, username }: { kind: Call['kind'], username: string }): string {
    const version = this.versions.get(username) ?? 0
    this.calls.push({ kind, username, at: this.clock.now(), version, pauses: this.pauses })
    return ` r${version}.${this.calls.length - 1}`
  }

  now (): number {
    return this.clock.now()
  }

  /** Every instance on Redis and subscribed; asked through the schedule's own client (an app's refuses commands while it reconnects). */
  async untilShared (): Promise<void> {
    await eventually(() => this.apps.every((app) => app.redisLayer?.health.up === true), 'every instance on Redis')
    const channel = eventsChannel(this.prefix)
    await eventually(async () => await this.#admin.pubsub('NUMSUB', channel).then((reply) => Number((reply as unknown[])[1]) >= this.apps.length, () => false),
      'every instance subscribed')
  }

  /** The version is bumped before the purge is sent: a body loaded from then on is the purge's. */
  async purge (instance: number, username: string): Promise<number> {
    const version = (this.versions.get(username) ?? 0) + 1
    this.versions.set(username, version)
    const app = this.instance(instance)
    const busLost = this.busLost
    // While the bus is lost, the purge's event is lost too: the subscribers are cut right before it.
    if (busLost) await this.#cutSubscribers()
    const heard = this.#purgesHeard.map((count) => count.get(username) ?? 0)
    const answer = await app.inject({ method: 'POST', url: `/admin/purge/${encodeURIComponent(username)}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    this.purges.push({ username, version, at: this.now(), status: answer.statusCode, busLost })
    if (answer.statusCode === 200 && !busLost) await this.#untilHeard(instance, username, heard)
    return answer.statusCode
  }

  /**
   * The purge's events reach the other instances a bus hop after its answer: in one process, an injected request
   * answered from memory can overtake a message already in its subscriber's socket. Bounded by the copies' life.
   */
  async #untilHeard (purger: number, username: string, before: number[]): Promise<void> {
    await eventually(() => this.#purgesHeard.every((count, index) => index === purger || (count.get(username) ?? 0) >= (before[index] ?? 0) + RESOURCES.length),
      `every instance hearing the purge of ${username}`, COPY_MS)
  }

  /**
   * The clock moves, once the loads under way are stored (a load the clock overtook would be stored as fresh from its
   * end); Redis's own expiry runs on real time, so purge marks older than their memory are dropped here.
   */
  async advance (ms: number): Promise<void> {
    await Promise.all(this.apps.map(async (app) => await app.cacheLoads.settled(2 * UPSTREAM_TIMEOUT_MS)))
    this.clock.advance(ms)
    if (this.#down()) return
    const forgotten = new Set(this.purges.filter((purge) => this.now() - purge.at > PURGE_MEMORY_MS).map((purge) => purge.username))
    for (const username of forgotten) {
      const keys = await this.#admin.keys(`${this.prefix}*{${username}}*:purge`)
      if (keys.length > 0) await this.#admin.del(...keys)
    }
  }

  /** Back, once every instance is subscribed again (a purge's event would otherwise be lost, not the bus's). */
  async busLoss (lost: boolean): Promise<void> {
    this.busLost = lost
    if (lost) await this.#cutSubscribers()
    else if (!this.#down()) await this.untilShared()
  }

  /** Before each step of a lost bus: what the step publishes is lost (a subscriber reconnects 200 ms after its cut). */
  async keepBusLost (): Promise<void> {
    if (this.busLost && !this.#down()) await this.#cutSubscribers()
  }

  /**
   * Redis hangs while `during` runs, until every instance noticed; once it answers again,
   * every instance reconnects and measures its offset anew.
   */
  async pause<T> (during: () => Promise<T>): Promise<T> {
    const outage: Outage = { from: this.now(), to: undefined }
    this.outages.push(outage)
    this.budgetSwitches.push(outage.from)
    this.#redis.pause()
    const answers = during()
    try {
      // Resumed once every instance noticed (its requests, or its probe within 1.5 s): one that did not would keep the
      // clock's advances in its offset to Redis's clock, which the others drop; a longer hang only spaces reconnections.
      await eventually(() => this.apps.every((app) => app.redisLayer?.health.up === false), 'the hang noticed everywhere')
    } finally {
      this.#redis.resume()
    }
    const result = await answers
    this.pauses++
    await this.untilShared()
    outage.to = this.now()
    this.budgetSwitches.push(outage.to)
    return result
  }

  async kill (): Promise<void> {
    this.outages.push({ from: this.now(), to: undefined })
    this.budgetSwitches.push(this.now())
    this.busLost = false
    await this.#redis.stop()
    await eventually(() => this.apps.every((app) => app.redisLayer?.health.up === false), 'every instance sees Redis gone')
  }

  async restart (): Promise<void> {
    await this.#redis.start()
    this.failovers++
    await eventually(() => this.#admin.status === 'ready', 'the schedule\'s own client back on Redis')
    await this.untilShared()
    const outage = this.outages.at(-1)
    if (outage !== undefined) outage.to = this.now()
    this.budgetSwitches.push(this.now())
  }

  async flush (): Promise<void> {
    this.failovers++
    this.budgetSwitches.push(this.now())
    await this.#admin.flushall()
  }

  #down (): boolean {
    return this.outages.at(-1)?.to === undefined && this.outages.length > 0
  }

  async #cutSubscribers (): Promise<void> {
    await this.#admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub')
  }

  instance (index: number): FastifyInstance {
    const app = this.apps[index]
    if (app === undefined) throw new Error(`no instance ${index}`)
    return app
  }
}
