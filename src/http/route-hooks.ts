import type { onRequestHookHandler, RouteOptions } from 'fastify'

/** Adds an onRequest hook to one route, after those it has (from an onRoute hook: decided once per route, not per request). */
export function addOnRequest (route: RouteOptions, hook: onRequestHookHandler): void {
  const { onRequest } = route
  route.onRequest = onRequest === undefined ? [hook] : [...(Array.isArray(onRequest) ? onRequest : [onRequest]), hook]
}
