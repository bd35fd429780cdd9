import type { Span } from '@opentelemetry/api'
import type { FastifyRequest } from 'fastify'

/**
 * The server span as the HTTP semantic conventions name it: `{method} {route}` (`GET /profile/:username`), or the
 * method alone when no route matched. `url.path` is the path only: a query string may hold what a caller should
 * never have put in a URL (a token), and the span must not carry it further.
 */
export function serverSpan (span: Span, request: FastifyRequest): void {
  const route = request.routeOptions.url
  span.updateName(route === undefined ? request.method : `${request.method} ${route}`)
  span.setAttributes({
    'url.path': request.url.split('?', 1)[0] ?? '',
    'url.scheme': request.protocol,
    'network.protocol.version': request.raw.httpVersion
  })
}
