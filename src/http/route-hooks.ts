import type { onRequestHookHandler, RouteOptions } from 'fastify'

/**
 * Adds an onRequest hook to one route, before those it has (from an onRoute hook: decided once per route, not per
 * request): a rate limit then counts the requests the route's own hooks refuse too (a wrong admin token, say).
 */
export function prependOnRequest (route: RouteOptions, hook: onRequestHookHandler): void {
  const { onRequest } = route
  route.onRequest = onRequest === undefined ? [hook] : [hook, ...(Array.isArray(onRequest) ? onRequest : [onRequest])]
}
