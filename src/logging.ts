import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify'

/** Fields under which a credential could reach a log line, at the top level or one object down. */
const SECRET_FIELDS = ['token', 'accessToken', 'access_token', 'secret', 'clientSecret', 'client_secret', 'password']
/** Headers that carry credentials, wherever a headers object is logged (a request, a response, an error's). */
const SECRET_HEADERS = ['authorization', 'cookie', '["set-cookie"]', '["proxy-authorization"]']

/**
 * What gets censored in every log line. Our own log calls never pass a token or the client secret;
 * this is the net under them (a header object, an upstream answer, an error carrying a request).
 */
export const REDACTED_PATHS = [
  ...SECRET_FIELDS.flatMap((field) => [field, `*.${field}`]),
  ...['headers', '*.headers', '*.*.headers'].flatMap((parent) =>
    SECRET_HEADERS.map((header) => header.startsWith('[') ? parent + header : `${parent}.${header}`))
]

/** Query parameters that look like credentials (a client that put its token in the URL). */
const SECRET_PARAMETER = /token|secret|password|auth|key|session/i

/** The URL as logged: its path and query, with the value of any credential-like parameter censored. */
export function loggedUrl (url: string): string {
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

export interface LoggerOptions {
  level: string
  redact: { paths: string[], censor: string }
}

/** The service's pino options; `server.ts` adds a transport, tests build their logger with them. */
export function loggerOptions (level: string): LoggerOptions {
  return { level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }
}

/** A caller's (or load balancer's) `X-Request-Id` is kept when it looks like an id, so logs join up across hops. */
const REQUEST_ID = /^[\w.:-]{1,128}$/

export function requestId (request: IncomingMessage): string {
  const header = request.headers['x-request-id']
  return typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID()
}

/**
 * One line per request, written when it is answered, instead of Fastify's two ("incoming request",
 * "request completed"). It names what is safe to name, never a header, so never a credential; like
 * every line a request causes, it carries the request's `reqId`.
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
      remoteAddress: request.ip,
      ...(typeof xCache === 'string' && { xCache })
    }
    if (error) reply.log.error({ ...line, err: error }, 'request errored')
    else reply.log.info(line, 'request completed')
  }
}
