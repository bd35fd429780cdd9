import { randomBytes } from 'node:crypto'
import type { RedisClient } from './client.ts'
import type { RedisCommands } from './commands.ts'
import type { RedisHealth } from './health.ts'
import { currentTraceparent } from '../telemetry/tracing.ts'

/**
 * What one instance tells the others about a key (an instance never hears its own events). `traceparent`, on the
 * events heard, names the span that published it when tracing was on there (the load a waiter links to).
 */
export type BusEvent = (
  /** A new version was stored (`etag` tells which). */
  | { type: 'filled', key: string, etag: string }
  /** The entry was purged: stale from now on. */
  | { type: 'staled', key: string }
  /** A load's lock was released, with or without a new version (the load may have failed). */
  | { type: 'released', key: string }
) & { traceparent?: string }

export interface BusListener {
  onEvent: (event: BusEvent) => void
  /** The subscription is gone, or Redis is down: events may be missed until `ready` again. */
  onLost: () => void
  /** Events are reliable again: Redis is up and this instance subscribed. */
  onReady: () => void
}

export interface RedisBusOptions {
  /** The shared client, for PUBLISH (a subscribed connection cannot send it). */
  publisher: Pick<RedisCommands, 'publish'>
  health: Pick<RedisHealth, 'up' | 'run' | 'listen'>
  /** A dedicated connection, owned here: closed with `close()`. */
  subscriber: RedisClient
  channel: string
  onError: (error: unknown) => void
}

const CODES = { filled: 'f', staled: 's', released: 'r' } as const

/**
 * The instances' shared channel (Redis pub/sub, one channel per deployment): cache fills and purges,
 * which keep every in-process tier coherent, and lock releases, which wake the instances waiting for
 * another one's load. Nothing polls.
 */
export class RedisBus {
  readonly #options: RedisBusOptions
  readonly #listeners = new Set<BusListener>()
  /** Tells this instance's messages from the others'. */
  readonly #origin = randomBytes(6).toString('base64url')
  #subscribed = false

  constructor (options: RedisBusOptions) {
    this.#options = options
    const { subscriber, channel, health } = options
    // A hung Redis may drop events without closing the subscription: nobody should count on them.
    health.listen((up) => { if (up) this.#notifyReady(); else this.#notifyLost() })
    subscriber.on('error', options.onError)
    // Subscribe on every (re)connection: the subscription is what makes events reliable again.
    subscriber.on('ready', () => { this.#subscribe() })
    subscriber.on('close', () => { this.#lost() })
    subscriber.on('message', (from: string, message: string) => {
      if (from !== channel) return
      const event = decode(message, this.#origin)
      if (event !== undefined) for (const listener of this.#listeners) listener.onEvent(event)
    })
    if (subscriber.status === 'ready') this.#subscribe()
  }

  /** Whether events from the other instances reach this one right now. */
  get ready (): boolean {
    return this.#subscribed && this.#options.health.up
  }

  listen (listener: BusListener): void {
    this.#listeners.add(listener)
  }

  async publish (event: BusEvent): Promise<void> {
    const { publisher, channel, health } = this.#options
    await health.run(async () => await publisher.publish(channel, encode(event, this.#origin, currentTraceparent())))
  }

  async close (): Promise<void> {
    this.#lost()
    const { subscriber } = this.#options
    await subscriber.quit().catch(() => subscriber.disconnect())
  }

  #subscribe (): void {
    this.#options.subscriber.subscribe(this.#options.channel).then(
      () => {
        this.#subscribed = this.#options.subscriber.status === 'ready'
        this.#notifyReady()
      },
      this.#options.onError
    )
  }

  #lost (): void {
    if (!this.#subscribed) return
    this.#subscribed = false
    this.#notifyLost()
  }

  #notifyLost (): void {
    for (const listener of this.#listeners) listener.onLost()
  }

  #notifyReady (): void {
    if (this.ready) for (const listener of this.#listeners) listener.onReady()
  }
}

/**
 * `<code> <origin>[;<traceparent>] <etag or -> <key>`: the key goes last, so nothing in it can break the format. The
 * traceparent rides on the origin, which an older instance only compares with its own: a rolling deploy still works.
 */
function encode (event: BusEvent, origin: string, traceparent: string | undefined): string {
  const from = traceparent === undefined ? origin : `${origin};${traceparent}`
  return `${CODES[event.type]} ${from} ${event.type === 'filled' ? event.etag : '-'} ${event.key}`
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
    case 's': return { type: 'staled', key, ...traced }
    case 'r': return { type: 'released', key, ...traced }
    default: return undefined
  }
}
