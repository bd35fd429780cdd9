import type { FastifyBaseLogger } from 'fastify'
import type { Bindings, ChildLoggerOptions, LogFn } from 'pino'

/**
 * A request's logger (`request.log`), whose pino child is made only when the request logs something: a hit
 * logs nothing but its access line, which access-line.ts writes without one. pino serializes a child's bindings
 * (the `reqId`) when making it, on every request otherwise (bench/README.md's device table has what it costs).
 * Lines written through it are the child's own, so the same as with Fastify's default factory.
 */
export class RequestLogger implements FastifyBaseLogger {
  readonly #parent: FastifyBaseLogger
  readonly #bindings: Bindings
  readonly #options: ChildLoggerOptions
  #child: FastifyBaseLogger | undefined

  constructor (parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent
    this.#bindings = bindings
    this.#options = options
  }

  /** The request's level, read without making the child: a route's own, else the logger's. */
  get level (): string {
    return this.#child?.level ?? this.#options.level ?? this.#parent.level
  }

  set level (level: string) {
    this.#made().level = level
  }

  fatal (...args: Parameters<LogFn>): void { this.#made().fatal(...args) }
  error (...args: Parameters<LogFn>): void { this.#made().error(...args) }
  warn (...args: Parameters<LogFn>): void { this.#made().warn(...args) }
  info (...args: Parameters<LogFn>): void { this.#made().info(...args) }
  debug (...args: Parameters<LogFn>): void { this.#made().debug(...args) }
  trace (...args: Parameters<LogFn>): void { this.#made().trace(...args) }
  silent (): void {}

  child (bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#made().child(bindings, options)
  }

  #made (): FastifyBaseLogger {
    this.#child ??= this.#parent.child(this.#bindings, this.#options)
    return this.#child
  }
}

/** Fastify's `childLoggerFactory`: each request's logger, made lazily. */
export function requestLogger (parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  return new RequestLogger(parent, bindings, options)
}
