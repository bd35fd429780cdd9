/** Where the OpenAPI UI (and its document under `/json`) is served. */
export const DOCS_PREFIX = '/docs'

/** Routes for operators, orchestrators and the docs: never counted against a client's budget. */
export function isOperationalRoute (route: string | undefined): boolean {
  if (route === undefined) return false
  return route === '/healthz' || route === '/readyz' || route === '/metrics' || route === DOCS_PREFIX || route.startsWith(`${DOCS_PREFIX}/`)
}
