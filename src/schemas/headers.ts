import type { TSchema } from '@sinclair/typebox'

/**
 * A response header as @fastify/swagger reads it from a response schema's `headers`. The document lists
 * the headers a client may read (see READ_HEADERS_RULE); transport headers and the browser's policy
 * headers (CORS, security) are on every answer and named once, in the document's description.
 */
interface HeaderDoc {
  type: 'string' | 'integer'
  description: string
  enum?: string[]
  /** Written on the header object, not its schema (see `requiredHeaders`). */
  required?: true
}

export type HeaderDocs = Record<string, HeaderDoc>

/** What the document says once about the headers it does not list per response. */
export const READ_HEADERS_RULE = 'Each response lists the headers a client may read. Every answer also carries headers meant for ' +
  'the browser, not listed per response: CORS (`Access-Control-*`, and `Vary: Origin` with a list of origins) and security ' +
  'headers (`Content-Security-Policy`, `Strict-Transport-Security`, `X-Content-Type-Options`, `X-Frame-Options`, ' +
  '`Referrer-Policy`, `Cross-Origin-Resource-Policy`); and the transport\'s own (`Content-Type`, `Content-Length`, ' +
  '`Date`, `Connection`, `Keep-Alive`, `Transfer-Encoding`).'

export const REQUEST_ID_HEADER: HeaderDocs = {
  'x-request-id': { type: 'string', description: 'this request\'s id, to quote when asking about it (the caller\'s own, when it sent a plausible one)' }
}

export const RATE_LIMIT_HEADERS: HeaderDocs = {
  'x-ratelimit-limit': { type: 'integer', description: 'requests (a batch: usernames) allowed per client address per minute' },
  'x-ratelimit-remaining': { type: 'integer', description: 'what is left of that budget in this minute' },
  'x-ratelimit-reset': { type: 'integer', description: 'seconds until the budget is renewed' }
}

export const NO_STORE_HEADER: HeaderDocs = {
  'cache-control': { type: 'string', enum: ['no-store'], description: '`no-store`: the answer describes this moment' }
}

export const RETRY_AFTER_HEADER: HeaderDocs = {
  'retry-after': { type: 'integer', description: 'seconds to wait before asking again (on every 503)', required: true }
}

const WWW_AUTHENTICATE_HEADER: HeaderDocs = {
  'www-authenticate': { type: 'string', description: '`Bearer realm="admin"`: the scheme the route expects' }
}

export const ALLOW_HEADER: HeaderDocs = {
  allow: { type: 'string', description: 'the methods the path has, e.g. `GET, HEAD`' }
}

/** How the cache answered: on every answer made from a cache entry, a negative one's 404 included. */
const CACHE_STATE_HEADERS: HeaderDocs = {
  'x-cache': { type: 'string', enum: ['HIT', 'MISS', 'STALE', 'BYPASS'], description: 'how the cache answered (a batch: its least fresh member, `MISS` when a member\'s load failed)' },
  age: { type: 'integer', description: 'seconds since the entry was loaded from the upstream (absent on MISS)' },
  'server-timing': { type: 'string', description: '`cache;desc=<X-Cache>`, and `upstream;dur=<ms>` when the answer waited for the upstream' }
}

/** On an error a lookup's load ended with (a 5xx after the cache had nothing to serve). */
const FAILED_LOAD_HEADERS: HeaderDocs = {
  'x-cache': { type: 'string', enum: ['MISS'], description: '`MISS` when a load ended with this error: the cache had nothing to serve' },
  'server-timing': { type: 'string', description: '`cache;desc=MISS, upstream;dur=<ms>` when a load ended with this error: how long it waited' }
}

/** Headers of a body that may be sent compressed (1,400 bytes or more). */
export const ENCODING_HEADERS: HeaderDocs = {
  vary: { type: 'string', description: '`accept-encoding` when the body is large enough to be sent compressed' },
  'content-encoding': { type: 'string', enum: ['br', 'gzip'], description: 'present when the body is compressed' }
}

/** Headers of an answer served through the cache (200, and 304 where no body is sent). */
export const CACHED_HEADERS: HeaderDocs = {
  ...CACHE_STATE_HEADERS,
  'cache-control': {
    type: 'string',
    description: '`public, max-age=<freshness left>, stale-while-revalidate=<at most the freshness>, stale-if-error=<stale window left>`'
  },
  etag: { type: 'string', description: 'this version of the body, in this encoding: send it back as `If-None-Match`' },
  ...ENCODING_HEADERS,
  ...REQUEST_ID_HEADER,
  ...RATE_LIMIT_HEADERS
}

/** Who sees which headers on an error: counted routes add the rate limit's, a lookup's the cache state of a failed load. */
export interface ErrorHeaderOptions {
  rateLimited: boolean
  loads?: boolean
}

/** Headers of an error answer with this status. */
export function errorHeaders (status: number, { rateLimited, loads = false }: ErrorHeaderOptions): HeaderDocs {
  return {
    'cache-control': { type: 'string', description: '`no-store`, except 404: `public, max-age=<seconds>`' },
    ...REQUEST_ID_HEADER,
    ...(status === 429 || status === 503 ? RETRY_AFTER_HEADER : {}),
    ...(status === 401 ? WWW_AUTHENTICATE_HEADER : {}),
    // Only the data routes answer 404 (a negative cache entry); any other path's is the document's NotFound.
    ...(status === 404 ? CACHE_STATE_HEADERS : {}),
    ...(loads && status >= 500 ? FAILED_LOAD_HEADERS : {}),
    ...(rateLimited ? RATE_LIMIT_HEADERS : {})
  }
}

/** A response schema with its headers documented; any `$id` dropped, so that the copy is never a second definition. */
export function withHeaders<T extends TSchema> (schema: T, headers: HeaderDocs): T {
  const documented: TSchema = { ...schema, headers }
  delete documented.$id
  return documented as T
}

type Responses = Record<string, { headers?: Record<string, { required?: boolean, schema?: { required?: unknown } }> }>

/**
 * Moves a header's `required` from its schema, where @fastify/swagger copies every field but the description, to the
 * header object, where OpenAPI reads it (@fastify/swagger's `transformObject`).
 */
export function requiredHeaders<D extends { paths?: object }> (document: D): D {
  for (const operations of Object.values(document.paths ?? {}) as Array<Record<string, { responses?: Responses }>>) {
    for (const { responses = {} } of Object.values(operations)) {
      for (const header of Object.values(responses).flatMap(({ headers = {} }) => Object.values(headers))) {
        if (header.schema?.required !== true) continue
        delete header.schema.required
        header.required = true
      }
    }
  }
  return document
}
