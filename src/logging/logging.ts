import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify'
import { traceIds } from '../telemetry/tracing.ts'
import { bareAddress, callerAddress } from './caller-address.ts'

/** Query parameters that look like credentials (a client that put its token in the URL). */
const SECRET_PARAMETER = /token|secret|password|auth|key|session/i

/** The URL as logged: its path and query, with the value of any credential-like parameter censored. */
function loggedUrl (url: string): string {
  const queryAt = url.indexOf('?')
  if (queryAt === -1) return url
  const parameters = url.slice(queryAt + 1).split('&').map((parameter) => {
    const name = parameter.split('=', 1)[0] ?? ''
    return SECRET_PARAMETER.test(decodeURIComponentSafe(name)) ? `${name}=[redacted]` : parameter
  })
  return `${url.slice(0, queryAt)}?${parameters.join('&')}`
}

function decodeURIComponentSafe (text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/** What a log line says about an error: these fields, and never anything else the error carries. */
// A type, not an interface: pino's serializer types want an index signature.
type SafeError = {
  type: string
  message: string
  stack: string
  code?: string | number
  statusCode?: number
  cause?: SafeError
  /** An AggregateError's first few errors (a refused connection to every address of a host, say). */
  errors?: SafeError[]
}

/** Causes and aggregated errors followed this deep: enough for a connection error under a fetch failure. */
const MAX_ERROR_DEPTH = 3
const MAX_AGGREGATED = 3

/**
 * Errors are the one place a log line could pick up a credential: an HTTP client's error may carry
 * its request options (the Authorization header, a token-endpoint body), a Redis error its command.
 * pino's default serializer copies every enumerable property; this one copies only the fields above,
 * so nothing attached to an error can reach a line, whatever it is named. A thrown non-error is
 * reduced to its type.
 */
function safeError (value: unknown, depth = 0): SafeError {
  if (!(value instanceof Error)) return { type: value === null ? 'null' : typeof value, message: 'a non-error was thrown', stack: '' }
  const { code, statusCode, cause } = value as Error & { code?: unknown, statusCode?: unknown }
  const safe: SafeError = { type: value.constructor.name, message: value.message, stack: value.stack ?? '' }
  if (typeof code === 'string' || typeof code === 'number') safe.code = code
  if (typeof statusCode === 'number') safe.statusCode = statusCode
  if (depth < MAX_ERROR_DEPTH) {
    if (cause !== undefined) safe.cause = safeError(cause, depth + 1)
    if (value instanceof AggregateError) {
      safe.errors = (value.errors as unknown[]).slice(0, MAX_AGGREGATED).map((each) => safeError(each, depth + 1))
    }
  }
  return safe
}

/** What a `req` field may be: a Fastify request, or whatever else a log call names so (a node:http one, a partial one). */
type LoggedRequest = { method?: unknown, url?: unknown, ip?: unknown }

/**
 * The request as Fastify's own lines (a failed write, say) name it: no header, the URL censored. A serializer
 * that throws takes down whatever logged, an event listener the whole process: only string fields are named.
 */
function safeRequest (request: LoggedRequest | null): { method?: string, url?: string, remoteAddress?: string } {
  const { method, url, ip } = request ?? {}
  const remoteAddress = typeof ip === 'string' ? bareAddress(ip) : undefined
  return {
    ...(typeof method === 'string' && { method }),
    ...(typeof url === 'string' && { url: loggedUrl(url) }),
    ...(remoteAddress !== undefined && { remoteAddress })
  }
}

function safeReply (reply: { statusCode: number }): { statusCode: number } {
  return { statusCode: reply.statusCode }
}

export interface LoggerOptions {
  level: string
  serializers: { err: typeof safeError, req: typeof safeRequest, res: typeof safeReply }
  mixin?: () => object
}

/**
 * The service's pino options; `server.ts` adds a transport, tests build their logger with them.
 * No `redact`: censoring paths costs ~20 µs on every line (a request's line included) to catch
 * what no log call passes. Credentials stay out by construction instead: our log calls pass only
 * primitives (counts, durations, keys, outcomes) and `err`, and `err`, `req` and `res` are reduced
 * to named safe fields by these serializers.
 */
export function loggerOptions (level: string, traced = false): LoggerOptions {
  const options: LoggerOptions = { level, serializers: { err: safeError, req: safeRequest, res: safeReply } }
  // With tracing on, a line names the trace and span it was written in (`trace_id`, `span_id`); off, nothing is looked up.
  if (traced) options.mixin = () => traceIds() ?? {}
  return options
}

/** Where log text goes: `process.stdout`, or a test's recorder. */
export interface LogOutput {
  write: (bytes: Uint8Array) => unknown
}

export interface BatchedLogOutputOptions {
  /** Bytes gathered before they are written at once. */
  maxBytes?: number
  /** Written at the latest this long after the first line pending. */
  maxDelayMs?: number
  /** Runs `flush` after `ms` (tests run it themselves); default: an unref'd timer. */
  schedule?: (flush: () => void, ms: number) => void
}

/** A few dozen access lines: one write system call where there were a few dozen. */
const MAX_PENDING_BYTES = 16 * 1024
/** Soon enough for whoever tails the log; lines wait no longer when traffic is light. */
const MAX_PENDING_MS = 100
/** A UTF-16 unit is at most 3 bytes of UTF-8: room is known without counting a line's bytes. */
const MAX_BYTES_PER_CHAR = 3

/**
 * The service's log destination off a terminal: lines are encoded into a buffer as they come and written
 * together, once it is full or `maxDelayMs` after the first line, whichever comes first. pino's default
 * destination makes one write system call per line, and every request logs one; once per event-loop turn
 * was still about one call per request under load (~3 µs of a cache hit), and gathering the lines as one
 * string cost as much again to flatten and encode at the write. Lines still waiting when the process exits
 * are written by the `exit` listener server.ts adds; only a process killed outright (SIGKILL, a native
 * crash) loses them, at most `maxDelayMs` of them.
 */
export class BatchedLogOutput {
  readonly #output: LogOutput
  readonly #maxBytes: number
  readonly #maxDelayMs: number
  readonly #schedule: NonNullable<BatchedLogOutputOptions['schedule']>
  #buffer: Buffer
  #used = 0
  #scheduled = false

  constructor (output: LogOutput, { maxBytes = MAX_PENDING_BYTES, maxDelayMs = MAX_PENDING_MS, schedule = unrefTimer }: BatchedLogOutputOptions = {}) {
    this.#output = output
    this.#maxBytes = maxBytes
    this.#maxDelayMs = maxDelayMs
    this.#schedule = schedule
    this.#buffer = Buffer.allocUnsafe(maxBytes)
  }

  write (line: string): void {
    const room = line.length * MAX_BYTES_PER_CHAR
    if (this.#used + room > this.#maxBytes) this.flush()
    if (room > this.#maxBytes) {
      // Larger than a whole batch: on its own, in order.
      this.#output.write(Buffer.from(line))
      return
    }
    this.#used += this.#buffer.write(line, this.#used)
    if (!this.#scheduled) {
      this.#scheduled = true
      this.#schedule(this.#flushScheduled, this.#maxDelayMs)
    }
  }

  readonly flush = (): void => {
    if (this.#used === 0) return
    const bytes = this.#buffer.subarray(0, this.#used)
    // A fresh buffer: the output may still hold this one (a full pipe queues the write).
    this.#buffer = Buffer.allocUnsafe(this.#maxBytes)
    this.#used = 0
    this.#output.write(bytes)
  }

  readonly #flushScheduled = (): void => {
    this.#scheduled = false
    this.flush()
  }
}

function unrefTimer (flush: () => void, ms: number): void {
  setTimeout(flush, ms).unref()
}

/** A caller's (or load balancer's) `X-Request-Id` is kept when it looks like an id, so logs join up across hops. */
const REQUEST_ID = /^[\w.:-]{1,128}$/

export function requestId (request: IncomingMessage): string {
  const header = request.headers['x-request-id']
  return typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID()
}

/**
 * One line per request, written when it is answered, instead of Fastify's two ("incoming request",
 * "request completed"). It names what is safe to name, never a header, so never a credential; it is
 * written through the request's own pino child (`reply.log`), so it carries the request's `reqId` and
 * keeps to a route's log level and serializers, like every line the request causes.
 */
export class OneLinePerRequest extends LogController {
  override incomingRequest (): void {}

  override requestCompleted (error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const xCache = reply.getHeader('x-cache')
    const line = {
      method: request.method,
      url: loggedUrl(request.url),
      statusCode: reply.statusCode,
      responseTime: Math.round(reply.elapsedTime * 100) / 100,
      remoteAddress: callerAddress(request),
      ...(typeof xCache === 'string' && { xCache })
    }
    if (error) reply.log.error({ ...line, err: error }, 'request errored')
    else reply.log.info(line, 'request completed')
  }
}
