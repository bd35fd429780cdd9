import * as errors from '../errors.ts'
import { COMMA_SEPARATED } from './batch.ts'
import { errorBody, type CodedError } from './common.ts'
import { ErrorBody, refusedBeforeRouting } from './error-docs.ts'
import { ALLOW_HEADER, NO_STORE_HEADER, READ_HEADERS_RULE, REQUEST_ID_HEADER, type HeaderDocs } from './headers.ts'

interface ResponseDoc {
  description: string
  headers: Record<string, { description: string, schema: object }>
  content: Record<string, { schema: object, example: object }>
}

/** A response object written out for the document's components (the operations' own come from their route schemas). */
function componentResponse (error: CodedError, headers: HeaderDocs): ResponseDoc {
  const body = errorBody(error)
  return {
    description: `${body.error}: \`${body.code}\``,
    headers: Object.fromEntries(Object.entries(headers).map(([name, { description, ...schema }]) => [name, { description, schema }])),
    content: { 'application/json': { schema: ErrorBody([body.code]), example: body } }
  }
}

/**
 * What the OpenAPI document says besides the operations: where the service is, its tags, the admin
 * token, and the answers to requests that match no operation, which no operation can list.
 */
export const DOCUMENT = {
  openapi: '3.1.0',
  info: {
    title: 'profile-bff',
    version: '1',
    // Who answers for the API: a team name only, the project naming no address of its own.
    contact: { name: 'profile-bff maintainers' },
    description: 'The Public Profile Lookup Service\'s three routes, same paths and bodies, cached and without credentials. ' +
      'Every error is `{statusCode, code, error, message}`; each operation lists the codes it can answer, those refused ' +
      'before any route runs included (a malformed request, headers or a request line too long, too slow a client): ' +
      'those, the same for every operation, are written once in the components (`RequestTimeout`, `UriTooLong`, ' +
      '`ExpectationFailed`, `HeadersTooLarge`). ' +
      'A request no operation matches answers `404 NOT_FOUND`, or `405 METHOD_NOT_ALLOWED` with `Allow` when its path ' +
      'has other methods (components `NotFound` and `MethodNotAllowed`, listed under `x-unmatched-requests`). ' +
      `Every \`GET\` also answers \`HEAD\`, with the same status and headers and no body. ${READ_HEADERS_RULE}`
  },
  // The answers to a request no operation matches, by status (a place OpenAPI has none for): the components below.
  'x-unmatched-requests': {
    404: { $ref: '#/components/responses/NotFound' },
    405: { $ref: '#/components/responses/MethodNotAllowed' }
  },
  servers: [{ url: '/', description: 'this service, at the origin that serves this document' }],
  tags: [
    { name: 'profiles', description: 'The upstream\'s routes, and the batch; rate limited per client address' },
    { name: 'operations', description: 'Liveness, readiness and metrics: never rate limited; /healthz and /metrics are answered even while load is shed' },
    {
      name: 'admin',
      description: 'Operator routes, only when ADMIN_TOKEN is set (else 404); rate limited per client address like the data routes'
    }
  ],
  components: {
    securitySchemes: {
      adminToken: { type: 'http' as const, scheme: 'bearer', description: 'ADMIN_TOKEN, as `Authorization: Bearer <ADMIN_TOKEN>`' }
    },
    responses: {
      ...Object.fromEntries(Object.entries(refusedBeforeRouting).map(([name, error]) => [name, componentResponse(error, {
        ...NO_STORE_HEADER,
        ...REQUEST_ID_HEADER
      })])),
      NotFound: componentResponse(new errors.NOT_FOUND('GET', '/nowhere'), {
        'cache-control': { type: 'string', description: '`public, max-age=<NOT_FOUND_TTL_SECONDS>`' },
        ...REQUEST_ID_HEADER
      }),
      MethodNotAllowed: componentResponse(new errors.METHOD_NOT_ALLOWED('DELETE', 'GET, HEAD'), {
        'cache-control': { type: 'string', enum: ['no-store'], description: '`no-store`' },
        ...ALLOW_HEADER,
        ...REQUEST_ID_HEADER
      })
    }
  }
}

type Operations = Record<string, { responses: Record<string, unknown>, parameters?: Array<{ in: string, name: string }> }>

/**
 * Writes the comma-separated query parameters (`fields=name,age`) as such (@fastify/swagger's `transformObject`):
 * @fastify/swagger reads `style` and `explode` off a whole querystring only, and ajv refuses them on a property.
 */
export function commaSeparated<D extends { paths?: object }> (document: D): D {
  for (const operations of Object.values(document.paths ?? {}) as Operations[]) {
    for (const { parameters = [] } of Object.values(operations)) {
      for (const parameter of parameters) {
        if (parameter.in === 'query' && COMMA_SEPARATED.has(parameter.name)) Object.assign(parameter, { style: 'form', explode: false })
      }
    }
  }
  return document
}

/**
 * Every operation refers to the answers refused before routing (@fastify/swagger's `transformObject`):
 * the same whatever the route, they are written once, in the components. Responses in order of status.
 */
export function referRefusals<D extends { paths?: object }> (document: D): D {
  for (const operations of Object.values(document.paths ?? {}) as Operations[]) {
    for (const operation of Object.values(operations)) {
      const refusals = Object.entries(refusedBeforeRouting).map(([name, error]) => [String(error.statusCode), { $ref: `#/components/responses/${name}` }])
      operation.responses = Object.fromEntries([...Object.entries(operation.responses), ...refusals].sort(([a], [b]) => Number(a) - Number(b)))
    }
  }
  return document
}
