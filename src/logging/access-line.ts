import { hostname } from 'node:os'
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify'
import { levels } from 'pino'
import { loggedUrl } from './logging.ts'

/** What pino writes each line to: a whole line at a time, its newline included. */
export interface LineDestination {
  write: (line: string) => unknown
}

/** pino's number for info; a level it does not number (`silent`) logs nothing. */
const INFO = levels.values.info ?? 30
const MESSAGE = 'request completed'
/** pino's default `base`: every line names the process that wrote it. */
const PID = process.pid
const HOSTNAME = hostname()

/**
 * One line per request, written when it is answered, instead of Fastify's two ("incoming request",
 * "request completed"). It names what is safe to name, never a header, so never a credential.
 *
 * Given the logger's destination, a success's line is written there directly, as pino writes it (level,
 * time, pid, hostname, reqId, the fields, msg: a test compares the two), so that a hit neither runs pino's
 * generic path nor makes its child logger (see request-logger.ts): bench/README.md's device table has what
 * that saves. It keeps to the request's level; no serializer of ours touches its fields, and no route sets
 * its own. Without a destination (a transport, a mixin, a logger instance), and for every error, the line
 * goes through the request's logger (`reply.log`), like every other line the request causes.
 */
export class OneLinePerRequest extends LogController {
  readonly #destination: LineDestination | undefined

  constructor (destination?: LineDestination) {
    super()
    this.#destination = destination
  }

  override incomingRequest (): void {}

  override requestCompleted (error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const xCache = reply.getHeader('x-cache')
    const fields = {
      method: request.method,
      url: loggedUrl(request.url),
      statusCode: reply.statusCode,
      responseTime: Math.round(reply.elapsedTime * 100) / 100,
      remoteAddress: request.ip,
      ...(typeof xCache === 'string' && { xCache })
    }
    if (error) {
      reply.log.error({ ...fields, err: error }, 'request errored')
    } else if (this.#destination === undefined) {
      reply.log.info(fields, MESSAGE)
    } else if ((levels.values[reply.log.level] ?? Number.POSITIVE_INFINITY) <= INFO) {
      const line = { level: INFO, time: Date.now(), pid: PID, hostname: HOSTNAME, reqId: request.id, ...fields, msg: MESSAGE }
      this.#destination.write(`${JSON.stringify(line)}\n`)
    }
  }
}
