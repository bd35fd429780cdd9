import * as errors from '../errors.ts'
import { errorBody, type CodedError } from './common.ts'
import { ErrorBody } from './error-docs.ts'
import { ALLOW_HEADER, READ_HEADERS_RULE, REQUEST_ID_HEADER, type HeaderDocs } from './headers.ts'

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
    description: 'The Public Profile Lookup Service\'s three routes, same paths and bodies, cached and without credentials. ' +
      'Every error is `{statusCode, code, error, message}`; each operation lists the codes it can answer, those refused ' +
      'before any route runs included (a malformed request, headers or a request line too long, too slow a client). ' +
      'A request no operation matches answers `404 NOT_FOUND`, or `405 METHOD_NOT_ALLOWED` with `Allow` when its path ' +
      'has other methods (components `NotFound` and `MethodNotAllowed`). Every `GET` also answers `HEAD`, with the ' +
      `same status and headers and no body. ${READ_HEADERS_RULE}`
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
