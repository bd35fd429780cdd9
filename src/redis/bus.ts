import { randomBytes } from 'node:crypto'
import { quitOrDrop, type RedisClient } from './client.ts'
import type { RedisClock } from './clock.ts'
import type { RedisCommands } from './commands.ts'
import { isReply, type RedisHealth } from './health.ts'
import { currentTraceparent } from '../telemetry/tracing.ts'

/**
 * What one instance tells the others about a key (an instance never hears its own events). `traceparent`, on the
 * events heard, names the span that published it when tracing was on there (the load a waiter links to).
 */
export type BusEvent = (
  /** A new version was stored (`etag` tells which). */
  | { type: 'filled', key: string, etag: string }
  /** The entry was purged: stale from now on. `purgedAt` (Redis's clock, ms; heard only) times its propagation. */
  | { type: 'staled', key: string, purgedAt?: number }
  /** A load's lock was released, with or without a new version (the load may have failed). */
  | { type: 'released', key: string }
) & { traceparent?: string }

export type BusListener = (event: BusEvent) => void

/** A time window an instance opened for every instance (the upstream's back-off): `name` says which, `ms` what remains of it. */
export interface WindowEvent {
  name: string
  ms: number
}

export interface RedisBusOptions {
  /** The shared client, for PUBLISH (a subscribed connection cannot send it). */
  publisher: Pick<RedisCommands, 'publish'>
  health: Pick<RedisHealth, 'up' | 'run' | 'listen'>
  /** A dedicated connection, owned here: closed with `close()`. */
  subscriber: RedisClient
  channel: string
  onError: (error: unknown) => void
  /** Whether events reach this instance (subscribed, Redis up), on every change (metrics, logs). */
  onChange?: (ready: boolean) => void
  /** Stamps purges with Redis's time, and hears how long each took to reach this instance once applied (seconds). */
  purgeTiming?: { clock: Pick<RedisClock, 'toRedis' | 'localNow'>, observe: (seconds: number) => void }
}

const CODES = { filled: 'f', staled: 's', released: 'r' } as const
const WINDOW_CODE = 'w'

/**
 * The instances' shared channel (Redis pub/sub, one channel per deployment): cache fills and purges,
 * which keep every in-process tier coherent, and lock releases, which wake the instances waiting for
 * another one's load. Nothing polls.
 */
export class RedisBus {
  readonly #options: RedisBusOptions
  readonly #listeners = new Set<BusListener>()
  readonly #windowListeners = new Set<(event: WindowEvent) => void>()
  readonly #readyListeners = new Set<() => void>()
  readonly #lostListeners = new Set<() => void>()
  /** Tells this instance's messages from the others'. */
  readonly #origin = randomBytes(6).toString('base64url')
  #subscribed = false
  #reported: boolean | undefined

  constructor (options: RedisBusOptions) {
    this.#options = options
    const { subscriber, channel, health } = options
    // A hung Redis may drop events without closing the subscription: nobody should count on them.
    health.listen((up) => {
      if (!up) this.#checkSubscriber()
      this.#report()
    })
    subscriber.on('error', options.onError)
    // Subscribe on every (re)connection: the subscription is what makes events reliable again.
    subscriber.on('ready', () => { this.#subscribe() })
    subscriber.on('close', () => { this.#lost() })
    subscriber.on('message', (from: string, message: string) => {
      if (from !== channel) return
      const window = decodeWindow(message, this.#origin)
      if (window !== undefined) for (const listener of this.#windowListeners) listener(window)
      const event = decode(message, this.#origin)
      if (event === undefined) return
      for (const listener of this.#listeners) listener(event)
      if (event.type === 'staled') this.#timePurge(event.purgedAt)
    })
    if (subscriber.status === 'ready') this.#subscribe()
  }

  /** Whether events from the other instances reach this one right now. */
  get ready (): boolean {
    return this.#subscribed && this.#options.health.up
  }

  get channel (): string {
    return this.#options.channel
  }

  listen (listener: BusListener): void {
    this.#listeners.add(listener)
  }

  /** The other instances' windows, as they open them. */
  listenWindows (listener: (event: WindowEvent) => void): void {
    this.#windowListeners.add(listener)
  }

  /** Each time events reach this instance again (subscribed, Redis up): what was published meanwhile was missed. */
  listenReady (listener: () => void): void {
    this.#readyListeners.add(listener)
  }

  /** Each time events stop reaching this instance (unsubscribed, or Redis down): what is published from now on is missed. */
  listenLost (listener: () => void): void {
    this.#lostListeners.add(listener)
  }

  async publish (event: BusEvent): Promise<void> {
    const { publisher, channel, health } = this.#options
    await health.run(async () => await publisher.publish(channel, this.message(event)))
  }

  async publishWindow (event: WindowEvent): Promise<void> {
    const { publisher, channel, health } = this.#options
    await health.run(async () => await publisher.publish(channel, `${WINDOW_CODE} ${this.#origin} ${Math.ceil(event.ms)} ${event.name}`))
  }

  /** What `publish` sends for `event`, for a script that publishes it along with its own work (one round trip). */
  message (event: BusEvent): string {
    const clock = this.#options.purgeTiming?.clock
    const stamped = event.type === 'staled' && clock !== undefined ? { ...event, purgedAt: clock.toRedis(clock.localNow()) } : event
    return encode(stamped, this.#origin, currentTraceparent())
  }

  async close (): Promise<void> {
    this.#lost()
    const { subscriber } = this.#options
    await quitOrDrop(subscriber)
  }

  /**
   * A subscription sends no command, so no bound would end one held on a hung server: a PING asks (ioredis bounds it),
   * and unanswered, the subscriber is dropped. Answered, it is kept: a flap of Redis's health costs no subscription.
   * (A Cluster's PING goes to any node: it shows that the Cluster answers, not the subscription's node, which ioredis
   * moves on a failover.)
   */
  #checkSubscriber (): void {
    const { subscriber } = this.#options
    if (subscriber.status !== 'ready') return
    subscriber.ping().catch(() => { this.#dropSubscriber() })
  }

  /** A subscriber that does not answer: its connection made again (with Sentinels, to the primary they name), subscribed on ready. */
  #dropSubscriber (): void {
    this.#lost()
    this.#options.subscriber.disconnect(true)
  }

  #subscribe (): void {
    const { subscriber, channel, onError } = this.#options
    subscriber.subscribe(channel).then(
      () => {
        this.#subscribed = subscriber.status === 'ready'
        this.#report()
      },
      (error: unknown) => {
        // Unanswered (a server that hung once the connection was made): dropped. Refused (NOPERM, say), it stays
        // reported as is: a new connection would be refused too.
        if (!isReply(error) && subscriber.status === 'ready') this.#dropSubscriber()
        onError(error)
      }
    )
  }

  #lost (): void {
    this.#subscribed = false
    this.#report()
  }

  #report (): void {
    const { ready } = this
    if (ready === this.#reported) return
    this.#reported = ready
    this.#options.onChange?.(ready)
    for (const listener of ready ? this.#readyListeners : this.#lostListeners) listener()
  }

  /** From the purge's time to now, both on Redis's clock (offsets a half round trip apart may make it negative: 0). */
  #timePurge (purgedAt: number | undefined): void {
    const timing = this.#options.purgeTiming
    if (timing === undefined || purgedAt === undefined) return
    timing.observe(Math.max(0, timing.clock.toRedis(timing.clock.localNow()) - purgedAt) / 1000)
  }
}

/**
 * `<code> <origin>[;<traceparent>] <etag, purge time or -> <key>`: the key goes last, so nothing in it can break the format.
 * The traceparent rides on the origin, and a purge's time on the field an older instance ignores for a purge: a rolling
 * deploy still works.
 */
function encode (event: BusEvent, origin: string, traceparent: string | undefined): string {
  const from = traceparent === undefined ? origin : `${origin};${traceparent}`
  return `${CODES[event.type]} ${from} ${detail(event)} ${event.key}`
}

function detail (event: BusEvent): string {
  if (event.type === 'filled') return event.etag
  return event.type === 'staled' && event.purgedAt !== undefined ? String(event.purgedAt) : '-'
}

/** `w <origin> <ms> <name>`: a window's event; undefined for anything else, and for this instance's own. */
function decodeWindow (message: string, ownOrigin: string): WindowEvent | undefined {
  const [code = '', origin = '', ms = ''] = message.split(' ', 3)
  if (code !== WINDOW_CODE || origin === ownOrigin || !/^\d+$/.test(ms)) return undefined
  return { name: message.slice(code.length + origin.length + ms.length + 3), ms: Number(ms) }
}

/** Undefined for this instance's own messages and for anything unreadable. */
function decode (message: string, ownOrigin: string): BusEvent | undefined {
  const [code = '', from = '', etag] = message.split(' ', 3)
  const [origin, traceparent] = from.split(';', 2)
  if (origin === ownOrigin || etag === undefined) return undefined
  const key = message.slice(code.length + from.length + etag.length + 3)
  const traced = traceparent === undefined ? {} : { traceparent }
  switch (code) {
    case 'f': return { type: 'filled', key, etag, ...traced }
    case 's': return { type: 'staled', key, ...traced, ...(/^\d+$/.test(etag) && { purgedAt: Number(etag) }) }
    case 'r': return { type: 'released', key, ...traced }
    default: return undefined
  }
}
