import { tracingChannel } from 'node:diagnostics_channel'
import { context, SpanKind, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api'
import { READ_OR_CLAIM, SET_IF_NEWER } from '../cache/redis-scripts.ts'

/** What ioredis (v6) publishes about each command on its `ioredis:command` tracing channel. */
interface CommandMessage {
  command: string
  /** Sanitised by ioredis; only EVAL's first (the script's source) is read, to name it, and none is recorded. */
  args?: readonly string[]
  serverAddress: string
  serverPort?: number
  database: number
  error?: unknown
  /** Ours: the command's span, from its start to its answer. */
  span?: Span
}

/**
 * The cache's scripts, named for the reader of a trace: an `EVAL` alone would not tell a miss's one round trip before
 * its call (the entry read, and the load's lock claimed) from the one after it (the fill stored and published, the
 * lock released).
 */
const SCRIPT_NAMES = new Map([[READ_OR_CLAIM, 'read_or_claim'], [SET_IF_NEWER, 'store_and_release']])

/**
 * Redis command spans, from the tracing channel ioredis publishes on (nothing is patched; ioredis publishes only
 * while someone subscribes). A command sent for a traced piece of work (a load, a token exchange) is its child; those
 * sent for nobody (the health probe's PINGs, the bus's subscription) make no span. Only the command's name is
 * recorded (and a known script's name: `EVAL read_or_claim`): never its arguments, which may hold a key's value or
 * the sealed token.
 */
export function traceRedisCommands (tracer: Tracer): void {
  tracingChannel<unknown, CommandMessage>('ioredis:command').subscribe({
    start (message) {
      const parent = context.active()
      if (trace.getSpan(parent) === undefined) return
      const operation = message.command.toUpperCase()
      const script = operation === 'EVAL' ? SCRIPT_NAMES.get(message.args?.[0] ?? '') : undefined
      message.span = tracer.startSpan(script === undefined ? operation : `${operation} ${script}`, {
        kind: SpanKind.CLIENT,
        attributes: {
          'db.system.name': 'redis',
          'db.operation.name': operation,
          ...(script !== undefined && { 'db.stored_procedure.name': script }),
          'db.namespace': String(message.database),
          'server.address': message.serverAddress,
          ...(message.serverPort !== undefined && { 'server.port': message.serverPort })
        }
      }, parent)
    },
    end () {},
    asyncStart () {},
    asyncEnd (message) {
      message.span?.end()
    },
    error (message) {
      message.span?.setStatus({ code: SpanStatusCode.ERROR, message: message.error instanceof Error ? message.error.name : 'failed' })
    }
  })
}
