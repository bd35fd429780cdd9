import { Pool } from 'undici'

/** Bodies above this are refused: a profile or a timeline is a few KiB. */
const MAX_UPSTREAM_BODY_BYTES = 1024 * 1024

/** A keep-alive pool to one origin, every phase of a call (connect, headers, body) bounded by `timeoutMs`. */
export function originPool (origin: string, timeoutMs: number, connections: number): Pool {
  return new Pool(origin, {
    connections,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    connect: { timeout: timeoutMs },
    maxResponseSize: MAX_UPSTREAM_BODY_BYTES
  })
}
