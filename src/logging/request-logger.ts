import type { FastifyBaseLogger } from 'fastify'
import type { Bindings, ChildLoggerOptions, Logger } from 'pino'

type LogCall = (...args: unknown[]) => void

/**
 * A request's logger (`request.log`), made the first time the request logs. Fastify gives each request
 * a child of the app's logger bound to its `reqId`, and pino serializes that binding as it makes the
 * child: ~2 µs of every request, while a request answered from the cache logs nothing but its access
 * line, which AccessLineWriter writes itself. What it logs is what the child logs, reqId included.
 */
class RequestLogger implements FastifyBaseLogger {
  readonly #parent: FastifyBaseLogger
  readonly #bindings: Bindings
  readonly #options: ChildLoggerOptions
  #child: FastifyBaseLogger | undefined
  /** A level or serializers of its own: a route's or a plugin's, or a level set on it. */
  #ownSettings: boolean

  constructor (parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent
    this.#bindings = bindings
    this.#options = options
    this.#ownSettings = options.level !== undefined || options.serializers !== undefined
  }

  /** Whether it writes a line exactly as `logger` would with its bindings added. */
  writesAs (logger: FastifyBaseLogger): boolean {
    return !this.#ownSettings && this.#parent === logger
  }

  get level (): string {
    return this.#child?.level ?? this.#options.level ?? this.#parent.level
  }

  set level (level: string) {
    this.#ownSettings = true
    this.#logger().level = level
  }

  fatal (...args: unknown[]): void { this.#log('fatal', args) }
  error (...args: unknown[]): void { this.#log('error', args) }
  warn (...args: unknown[]): void { this.#log('warn', args) }
  info (...args: unknown[]): void { this.#log('info', args) }
  debug (...args: unknown[]): void { this.#log('debug', args) }
  trace (...args: unknown[]): void { this.#log('trace', args) }
  silent (): void {}

  child (bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#logger().child(bindings, options)
  }

  /** pino's own, for code written against the pino child `request.log` used to be (the child is made then). */
  isLevelEnabled (level: string): boolean {
    return (this.#logger() as Logger).isLevelEnabled(level)
  }

  bindings (): Bindings {
    return (this.#logger() as Logger).bindings()
  }

  #log (level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace', args: unknown[]): void {
    const logger = this.#logger()
    Reflect.apply(logger[level] as LogCall, logger, args)
  }

  #logger (): FastifyBaseLogger {
    this.#child ??= this.#parent.child(this.#bindings, this.#options)
    return this.#child
  }
}

/** Fastify's `childLoggerFactory`: each request's logger, made only if the request logs. */
export function requestLogger (
  logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions
): FastifyBaseLogger & Pick<Logger, 'isLevelEnabled' | 'bindings'> {
  return new RequestLogger(logger, bindings, options)
}

/** Whether `log` is a request's logger that writes as `logger` does, with nothing of its own (see RequestLogger). */
export function writesAs (log: FastifyBaseLogger, logger: FastifyBaseLogger): boolean {
  return log instanceof RequestLogger && log.writesAs(logger)
}
