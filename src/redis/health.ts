import { Cluster } from 'ioredis'
import { CACHE_UNAVAILABLE } from '../errors.ts'
import type { RedisClock } from './clock.ts'
import type { RedisCommands } from './commands.ts'

/** What the health state needs of the client: TIME, its connection status and events, and a way to drop a hung connection. */
export interface ProbedClient extends Pick<RedisCommands, 'time'> {
  status: string
  on: (event: 'ready' | 'close', listener: () => void) => unknown
  disconnect: (reconnect?: boolean) => void
  /** SELECT, sent again as Redis comes up: ioredis goes on with database 0 when its own is refused. */
  select?: (db: number) => Promise<unknown>
}

export interface RedisHealthOptions {
  client: ProbedClient
  /** Set each time Redis comes up. */
  clock: RedisClock
  /** How often the probe pings while Redis is down. */
  downProbeMs?: number
  /** How often it pings while Redis is up: a hang is noticed even with no traffic. */
  upProbeMs?: number
  /** How long a caller waits for a command at most (whatever the client's own queues hold it back). */
  commandTimeoutMs?: number
  /** Reported on every change (metrics, logs). */
  onChange?: (up: boolean, cause?: unknown) => void
  /** The database REDIS_URL names (0 when none). */
  database?: number
}

export type HealthListener = (up: boolean) => void

/** How long a caller waits for one command at most, from when it is issued (see `#bounded`; ioredis's is longer). */
export const COMMAND_TIMEOUT_MS = 500

/**
 * Until the clock's error is within this (ms), the probe runs at every tick: a first TIME read late is narrowed at once.
 * At most this many times after Redis comes up: a Redis whose round trip is that long (another zone) narrows it no more.
 */
const SETTLED_CLOCK_ERROR_MS = 5
const SETTLING_PROBES = 8

/**
 * The one answer to "may we talk to Redis now?", read synchronously by every consumer. A command that
 * times out or loses its connection flips it to down at once; from then on `run` rejects without
 * sending anything, and only the background probe (a TIME, never a caller) flips it back up.
 * A ReplyError is Redis answering: it says nothing about Redis's health.
 */
export class RedisHealth {
  readonly #client: ProbedClient
  readonly #database: number
  readonly #clock: RedisClock
  readonly #upProbeEvery: number
  readonly #commandTimeoutMs: number
  readonly #onChange: NonNullable<RedisHealthOptions['onChange']>
  readonly #listeners = new Set<HealthListener>()
  /** How to let go of each caller still waiting for a command: all at once, as soon as Redis is known down. */
  readonly #waiting = new Set<(reason: Error) => void>()
  readonly #timer: NodeJS.Timeout
  #up = false
  #probing = false
  #closed = false
  #ticks = 0
  /** Probes left to narrow the clock's error at every tick. */
  #settling = 0

  constructor ({ client, clock, downProbeMs = 250, upProbeMs = 1_000, commandTimeoutMs = COMMAND_TIMEOUT_MS, onChange = () => {}, database = 0 }: RedisHealthOptions) {
    this.#client = client
    this.#database = database
    this.#clock = clock
    this.#upProbeEvery = Math.max(1, Math.round(upProbeMs / downProbeMs))
    this.#commandTimeoutMs = commandTimeoutMs
    this.#onChange = onChange
    client.on('ready', () => { this.#probe() })
    client.on('close', () => { this.#down(new Error('connection closed')) })
    this.#timer = setInterval(() => { this.#tick() }, downProbeMs).unref()
  }

  get up (): boolean {
    return this.#up && this.#client.status === 'ready'
  }

  listen (listener: HealthListener): void {
    this.#listeners.add(listener)
  }

  /** Runs a command unless Redis is down; every failure rejects with CACHE_UNAVAILABLE. */
  async run<T> (command: () => Promise<T>): Promise<T> {
    if (!this.up) throw new CACHE_UNAVAILABLE('redis is down')
    try {
      return await this.#bounded(command())
    } catch (error) {
      if (!isReply(error)) this.#down(error)
      throw new CACHE_UNAVAILABLE('a redis command failed', { cause: error })
    }
  }

  /**
   * The caller's whole wait, from when the command is issued (ioredis's own timeout would start only once it reaches a
   * connection). Timers run before the event loop reads its sockets, so the bound ends a turn later: an answer that
   * came in time, while this process was held up past the bound (a long GC, a starved CPU), is read first, and a Redis
   * that answered is not marked hung for this process's delay (ioredis's own timer, which would fail it, is longer).
   */
  async #bounded<T> (command: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined
    let letGo: (reason: Error) => void = () => {}
    const timeout = new Promise<never>((_resolve, reject) => {
      letGo = reject
      timer = setTimeout(() => { setImmediate(() => { reject(new Error('Command timed out')) }) }, this.#commandTimeoutMs)
    })
    this.#waiting.add(letGo)
    try {
      return await Promise.race([command, timeout])
    } finally {
      clearTimeout(timer)
      this.#waiting.delete(letGo)
    }
  }

  /** Stops probing; from now on nothing is sent. */
  close (): void {
    clearInterval(this.#timer)
    this.#closed = true
    this.#up = false
  }

  #tick (): void {
    this.#ticks++
    const settling = this.#settling > 0 && this.#clock.errorMs > SETTLED_CLOCK_ERROR_MS
    // Counted when sent: a probe still on its way (a slow Redis) spends none of them.
    if (settling && !this.#probing) this.#settling--
    if (!this.#up || this.#ticks % this.#upProbeEvery === 0 || settling) this.#probe()
  }

  #probe (): void {
    if (this.#probing) return
    if (this.#client.status !== 'ready') return this.#down(new Error(`redis is ${this.#client.status}`))
    this.#probing = true
    this.#probeCommand().then(
      () => this.#set(true),
      (error: unknown) => this.#down(error)
    ).finally(() => { this.#probing = false })
  }

  /** A TIME: coming up, it sets the clock before anyone converts a time with it; while up, it narrows the clock's error. */
  async #probeCommand (): Promise<void> {
    if (!everySlotServed(this.#client)) throw new Error('a Cluster shard has no primary connected')
    if (!this.#up) await this.#onNamedDatabase()
    const now = this.#clock.localNow
    const sentAt = now()
    const time = await this.#bounded(this.#client.time())
    const answer: [string, string] = [String(time[0]), String(time[1])]
    if (this.#up) return this.#clock.refine(answer, sentAt, now())
    this.#clock.sync(answer, sentAt, now())
    this.#settling = SETTLING_PROBES
  }

  /**
   * Coming up: on the database REDIS_URL names, or not up at all. ioredis goes on with database 0 when its SELECT is
   * refused (out of range, an ACL without it), so it is sent again here, and a refusal keeps the cache in-process.
   */
  async #onNamedDatabase (): Promise<void> {
    const db = this.#database
    if (db === 0 || this.#client.select === undefined || this.#client instanceof Cluster) return
    await this.#bounded(this.#client.select(db))
  }

  #down (cause: unknown): void {
    // A hung connection holds the commands already sent (a probe's, while down): dropped, it reconnects (with
    // Sentinels, to whichever primary they name); its queue fails only once it has closed, so callers are let go now.
    if (isTimeout(cause) && !this.#closed) this.#client.disconnect(true)
    if (!this.#up) return
    this.#set(false, cause)
    for (const letGo of this.#waiting) letGo(new Error('Redis went down meanwhile', { cause }))
  }

  #set (up: boolean, cause?: unknown): void {
    if (up === this.#up || this.#closed) return
    this.#up = up
    this.#onChange(up, cause)
    for (const listener of this.#listeners) listener(up)
  }
}

/**
 * A Cluster is up while every slot's primary is connected: a probe answered by a live shard would otherwise bring it up
 * between the dead shard's timeouts, again and again until the failover (each time the copies held were handed back).
 */
function everySlotServed (client: ProbedClient): boolean {
  if (!(client instanceof Cluster)) return true
  const connected = new Set(client.nodes('master').map((node) => `${node.options.host ?? ''}:${node.options.port ?? ''}`))
  if (client.slots.every((owners) => connected.has(owners[0] ?? ''))) return true
  // Until the Cluster names the promoted replica (nothing is sent meanwhile, so no MOVED tells the client).
  client.refreshSlotsCache()
  return false
}

/**
 * Whether a command `run` rejected may still take effect: it was sent and Redis did not answer (a timeout, a lost
 * connection). A hung Redis runs what it had received when it resumes, after the caller gave up on it.
 */
export function mayHaveRun (error: unknown): boolean {
  return error instanceof CACHE_UNAVAILABLE && error.cause !== undefined && !isReply(error.cause)
}

/** Whether `error` is Redis's own answer (a ReplyError: NOPERM, WRONGTYPE...), not a failure to get one. */
export function isReply (error: unknown): boolean {
  return error instanceof Error && error.name === 'ReplyError'
}

function isTimeout (error: unknown): boolean {
  return error instanceof Error && /timed out/i.test(error.message)
}
