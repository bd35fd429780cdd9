import { tracingChannel } from 'node:diagnostics_channel'
import { context, SpanKind, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api'

/** What ioredis (v6) publishes about each command on its `ioredis:command` tracing channel. */
interface CommandMessage {
  command: string
  serverAddress: string
  serverPort?: number
  database: number
  error?: unknown
  /** Ours: the command's span, from its start to its answer. */
  span?: Span
}

/**
 * Redis command spans, from the tracing channel ioredis publishes on (nothing is patched; ioredis publishes only
 * while someone subscribes). A command sent for a traced piece of work (a load, a token exchange) is its child; those
 * sent for nobody (the health probe's PINGs, the bus's subscription) make no span. Only the command's name is
 * recorded: never its arguments, which may hold a key's value or the sealed token.
 */
export function traceRedisCommands (tracer: Tracer): void {
  tracingChannel<unknown, CommandMessage>('ioredis:command').subscribe({
    start (message) {
      const parent = context.active()
      if (trace.getSpan(parent) === undefined) return
      message.span = tracer.startSpan(message.command.toUpperCase(), {
        kind: SpanKind.CLIENT,
        attributes: {
          'db.system.name': 'redis',
          'db.operation.name': message.command.toUpperCase(),
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
