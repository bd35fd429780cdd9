import { maxHeaderSize } from 'node:http'
import type { FastifyError } from 'fastify'
import { HEADERS_TOO_LARGE, MALFORMED_REQUEST, PAYLOAD_TOO_LARGE, REQUEST_TIMEOUT } from '../errors.ts'

/** An error node:http's server emits as `clientError`: its parser's (`HPE_*`), or a request too slow. */
export interface ClientError extends Error {
  code?: string
}

/** A request that was too slow: its connection is cut off rather than kept waiting for more. */
export function timedOut (error: ClientError): boolean {
  return error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
}

/** What node:http's refusal means for the caller, as the contract's coded error. */
export function refusal (error: ClientError): FastifyError {
  if (timedOut(error)) return new REQUEST_TIMEOUT()
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW': return new HEADERS_TOO_LARGE(maxHeaderSize / 1024)
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW': return new PAYLOAD_TOO_LARGE()
    // The parser's own reason (`Invalid header value char`), never the caller's bytes.
    default: return new MALFORMED_REQUEST(error.message.replace(/^Parse Error: /, ''))
  }
}
