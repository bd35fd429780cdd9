import { Writable } from 'node:stream'
import { UPSTREAM_AUTH_FAILED } from '../../src/errors.ts'
import { loggerOptions } from '../../src/logging/logging.ts'
import { noTelemetry, type Telemetry } from '../../src/telemetry/telemetry.ts'
import type { UpstreamLog } from '../../src/upstream/log.ts'
import type { MintedToken } from '../../src/upstream/token-endpoint.ts'

/**
 * An identity provider in memory: counts exchanges, mints `token-1`, `token-2`, ... (or `<name>-1`), fails while
 * `failing` is set, and holds its answers while `hold` is set (until `release()`).
 */
export class FakeEndpoint {
  exchanges = 0
  failing = false
  lifetimeMs: number
  readonly name: string
  #held: Array<() => void> = []
  hold = false

  /** `name` prefixes the tokens it mints, so that two instances' tokens differ. */
  constructor (lifetimeMs = 3_600_000, name = 'token') {
    this.lifetimeMs = lifetimeMs
    this.name = name
  }

  exchange = async (): Promise<MintedToken> => {
    this.exchanges++
    const n = this.exchanges
    if (this.hold) await new Promise<void>((resolve) => this.#held.push(resolve))
    if (this.failing) throw new UPSTREAM_AUTH_FAILED('the identity provider answered 500')
    return { value: `${this.name}-${n}`, lifetimeMs: this.lifetimeMs }
  }

  release (): void {
    this.hold = false
    for (const resolve of this.#held.splice(0)) resolve()
  }
}

/** Telemetry that remembers every event, in order. */
export function recordingTelemetry (): Telemetry & { events: string[] } {
  const events: string[] = []
  return {
    ...noTelemetry,
    events,
    tokenExchange: (outcome) => { events.push(`token:${outcome}`) },
    upstreamCall: (resource, outcome) => { events.push(`call:${resource}:${outcome}`) },
    backoff: (active) => { events.push(`backoff:${active}`) },
    breaker: (state) => { events.push(`breaker:${state}`) }
  }
}

/** A logger that keeps each line as JSON text, to assert on what operators would read. */
export function recordingLog (): UpstreamLog & { lines: string[] } {
  const lines: string[] = []
  const write = (level: string) => (details: object, message: string): void => {
    lines.push(JSON.stringify({ level, message, ...details }, (_key, value: unknown) =>
      value instanceof Error ? { message: value.message, cause: String(value.cause) } : value))
  }
  return { lines, debug: write('debug'), info: write('info'), warn: write('warn') }
}

export type LogLine = Record<string, unknown> & { level: number, msg: string, reqId?: string }

/** The service's own logger options (for an app's `logger`), writing into an array instead of stdout. */
export function capturedLogger () {
  const lines: LogLine[] = []
  const raw: string[] = []
  const stream = new Writable({
    write (chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) {
        raw.push(line)
        lines.push(JSON.parse(line) as LogLine)
      }
      done()
    }
  })
  return { logger: { ...loggerOptions('debug'), stream }, lines, raw }
}
