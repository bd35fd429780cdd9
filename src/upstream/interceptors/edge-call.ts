import type { Dispatcher } from 'undici'
import type { Priority } from '../../resources.ts'

export type Headers = Record<string, string | string[] | undefined>
export type Controller = Dispatcher.DispatchController

/**
 * One upstream call as the interceptors see it: why it is made, its one deadline (app clock), what says that no caller
 * wants it any more, and when it left for the wire.
 */
export interface EdgeCall {
  priority: Priority
  /**
   * When the caller that started the load gives up (app clock), set once at the cache boundary from that caller's
   * arrival: what every interceptor's "send by" counts back from. A sent call has its own limit instead (deadline.ts).
   */
  deadlineAt: number
  /** Aborts once no caller waits for the answer: the call is dropped if not yet sent, never once it is. */
  unwanted?: AbortSignal
  sentAt?: number
}

/** The last moment the call is worth sending: its deadline less what the upstream has been taking. */
export function sendBy (call: EdgeCall, expectedMs: number): number {
  return call.deadlineAt - expectedMs
}

/** Dispatch options of one call through the edge: undici's own, and the call's record. */
export type EdgeOptions = Dispatcher.DispatchOptions & { call?: EdgeCall, signal?: AbortSignal }

export type Dispatch = Dispatcher['dispatch']
export type Interceptor = Dispatcher.DispatcherComposeInterceptor

/** The call's record, which UpstreamClient passes with every request. */
export function callOf (opts: Dispatcher.DispatchOptions): EdgeCall {
  const { call } = opts as EdgeOptions
  if (call === undefined) throw new TypeError('expected opts.call: dispatch through UpstreamClient')
  return call
}

export function signalOf (opts: Dispatcher.DispatchOptions): AbortSignal | undefined {
  return (opts as EdgeOptions).signal
}

/** Passes every event on: interceptors override the ones their concern needs (undici's DecoratorHandler is deprecated). */
export class Forward implements Dispatcher.DispatchHandler {
  protected readonly handler: Dispatcher.DispatchHandler

  constructor (handler: Dispatcher.DispatchHandler) {
    this.handler = handler
  }

  onRequestStart (controller: Controller, context: unknown): void {
    this.handler.onRequestStart?.(controller, context)
  }

  onResponseStart (controller: Controller, statusCode: number, headers: Headers, statusMessage?: string): void {
    this.handler.onResponseStart?.(controller, statusCode, headers, statusMessage)
  }

  onResponseData (controller: Controller, chunk: Buffer): void {
    this.handler.onResponseData?.(controller, chunk)
  }

  onResponseEnd (controller: Controller, trailers: Headers): void {
    this.handler.onResponseEnd?.(controller, trailers)
  }

  onResponseError (controller: Controller, error: Error): void {
    this.handler.onResponseError?.(controller, error)
  }
}

/** The controller of a call that never reached a connection: there is nothing to abort, pause or resume. */
const NOT_SENT: Controller = {
  aborted: true,
  paused: false,
  reason: null,
  abort: () => {},
  pause: () => {},
  resume: () => {}
}

/** Ends a call with `error` from outside any request on the wire: before it was sent, or between two attempts. */
export function fail (handler: Dispatcher.DispatchHandler, error: unknown): void {
  handler.onResponseError?.(NOT_SENT, error instanceof Error ? error : new Error(String(error)))
}
