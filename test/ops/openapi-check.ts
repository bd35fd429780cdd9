import { OpenAPIRouter, OpenAPIValidator, SetMatchType, type Operation } from 'openapi-backend'

type Definition = ConstructorParameters<typeof OpenAPIRouter>[0]['definition']
type Responses = Record<string, { headers?: object, content?: Record<string, unknown> }>

/** One request as sent and its answer as received. */
export interface Exchange {
  method: string
  /** Path and query string, as on the request line. */
  url: string
  headers?: Record<string, string>
  status: number
  responseHeaders: Record<string, string | string[] | number | undefined>
  body: string
}

/**
 * Headers the document names once, in its description, rather than per response: the transport's own and
 * those meant for the browser (CORS, security). Any other header an answer carries must be documented.
 */
const UNLISTED = /^(content-type|content-length|date|connection|keep-alive|transfer-encoding|access-control-.*|content-security-policy|strict-transport-security|x-content-type-options|x-frame-options|referrer-policy|cross-origin-resource-policy)$/

/** The headers the document lists per response: `Vary: Origin` is CORS's, the rest of a `Vary` is the response's own. */
function readable (headers: Exchange['responseHeaders']): Exchange['responseHeaders'] {
  const listed = Object.entries(headers).filter(([name]) => !UNLISTED.test(name)).map(([name, value]): [string, typeof value] => {
    if (name !== 'vary') return [name, value]
    return [name, String(value).split(',').map((token) => token.trim()).filter((token) => token.toLowerCase() !== 'origin').join(', ')]
  })
  return Object.fromEntries(listed.filter(([name, value]) => name !== 'vary' || value !== ''))
}

/**
 * Query parameters the document shows as enums of lower-case values and says are matched in any case: the
 * one leniency of the check, which lower-cases their values (and nothing else) before validating a request.
 */
const ANY_CASE_PARAMETERS = new Set(['query', 'fields'])

/** `query` (a query string) with the values of ANY_CASE_PARAMETERS lower-cased. */
function caseFolded (query: string): string {
  return query.split('&').map((pair) => {
    const [name = '', value] = pair.split(/=(.*)/s)
    return value !== undefined && ANY_CASE_PARAMETERS.has(name) ? `${name}=${value.toLowerCase()}` : pair
  }).join('&')
}

/** The document with each response it refers to (`#/components/responses/…`) written in place, as the validator reads them. */
export function resolveResponses<D extends Record<string, unknown>> (document: D): D & { paths: object } {
  const components = (document.components as { responses: Responses }).responses
  const paths = Object.fromEntries(Object.entries(document.paths as object).map(([path, operations]) => [path, Object.fromEntries(
    Object.entries(operations as Record<string, { responses: Record<string, { $ref?: string }> }>).map(([method, operation]) => [method, {
      ...operation,
      responses: Object.fromEntries(Object.entries(operation.responses).map(([status, response]) =>
        [status, response.$ref === undefined ? response : components[response.$ref.replace('#/components/responses/', '')]]))
    }]))]))
  return { ...document, paths }
}

/** The answers to a request no operation matches, from the document's components, as one operation to validate against. */
const COMPONENTS_ID = 'components'

/**
 * What openapi-backend (a validator independent of the service's Fastify and ajv setup) finds wrong in
 * an exchange, checked against the document: a request no operation takes or that breaks its parameters,
 * and a status, header, media type or body the operation does not list. Empty when the document tells
 * the truth about the exchange.
 */
export class DocumentCheck {
  readonly #router: OpenAPIRouter
  readonly #validator: OpenAPIValidator

  /** `components`: for each status of an answer to a request no operation matches, the name of its response in the components. */
  constructor (document: Record<string, unknown>, components: Record<number, string>) {
    const { responses } = document.components as { responses: Responses }
    const byStatus = Object.fromEntries(Object.entries(components).map(([status, name]) => [status, responses[name]]))
    const paths = { ...resolveResponses(document).paths, [`/${COMPONENTS_ID}`]: { get: { operationId: COMPONENTS_ID, responses: byStatus } } }
    const definition = { ...document, paths } as unknown as Definition
    this.#router = new OpenAPIRouter({ definition, ignoreTrailingSlashes: false })
    this.#validator = new OpenAPIValidator({ definition, router: this.#router })
  }

  /** The operation the document has for a request (HEAD: its GET's, which the document says HEAD shares). */
  operation (method: string, url: string): Operation | undefined {
    return this.#router.matchOperation({ method: method === 'HEAD' ? 'GET' : method, path: url, headers: {} })
  }

  /** Whether the document takes this request as valid for its operation. */
  requestFindings ({ method, url, headers = {} }: Pick<Exchange, 'method' | 'url' | 'headers'>): string[] {
    const operation = this.operation(method, url)
    if (operation === undefined) return [`no operation for ${method} ${url}`]
    const [path = '', query = ''] = url.split(/\?(.*)/s)
    try {
      const result = this.#validator.validateRequest({ method, path, query: caseFolded(query), headers }, operation)
      return (result.errors ?? []).map((error) => `request ${error.instancePath} ${error.message ?? ''}`)
    } catch (error) {
      // A path its parameters cannot be read from (`%ZZ`): the document cannot take it either.
      return [`request ${String(error)}`]
    }
  }

  /** What the document does not say of this answer; `component` for an answer to a request no operation matches. */
  responseFindings (exchange: Exchange, component = false): string[] {
    const operation = component ? this.#router.getOperation(COMPONENTS_ID) : this.operation(exchange.method, exchange.url)
    if (operation === undefined) return [`no operation for ${exchange.method} ${exchange.url}`]
    const documented = (operation.responses as Responses)[String(exchange.status)]
    if (documented === undefined) return [`status ${exchange.status} undocumented`]
    const headerResult = this.#validator.validateResponseHeaders(readable(exchange.responseHeaders), operation, { statusCode: exchange.status, setMatchType: SetMatchType.Subset })
    const findings = (headerResult.errors ?? []).map((error) => `header ${error.instancePath} ${error.message ?? ''} ${JSON.stringify(error.params)}`)
    return [...findings, ...this.#bodyFindings(exchange, operation, documented.content)]
  }

  #bodyFindings (exchange: Exchange, operation: Operation, content: Record<string, unknown> | undefined): string[] {
    if (content === undefined || exchange.method === 'HEAD') return exchange.body === '' ? [] : ['a body where the document has none']
    const type = String(exchange.responseHeaders['content-type'] ?? '').split(';')[0]?.trim() ?? ''
    if (!(type in content)) return [`media type ${type} undocumented`]
    const body: unknown = type === 'application/json' ? JSON.parse(exchange.body) : exchange.body
    const result = this.#validator.validateResponse(body, operation, exchange.status)
    return (result.errors ?? []).map((error) => `body ${error.instancePath} ${error.message ?? ''}`)
  }
}
