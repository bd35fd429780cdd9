import type { ErrorResponse } from '../schemas/common.ts'

/**
 * An error's whole answer, status line to body, for a socket no response object writes to (a request
 * node:http refused, a CONNECT): the contract's body and headers, and `Connection: close`.
 */
export function rawErrorAnswer (body: ErrorResponse, headers: Readonly<Record<string, string>>): string {
  const payload = JSON.stringify(body)
  const all: Record<string, string> = {
    ...headers,
    'cache-control': 'no-store',
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(payload)),
    date: new Date().toUTCString(),
    connection: 'close'
  }
  const lines = Object.entries(all).map(([name, value]) => `${name}: ${value}\r\n`).join('')
  return `HTTP/1.1 ${body.statusCode} ${body.error}\r\n${lines}\r\n${payload}`
}
