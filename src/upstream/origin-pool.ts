import { Client, Pool } from 'undici'
import { MAX_UPSTREAM_BODY_BYTES } from '../resources.ts'

/**
 * A keep-alive pool to one origin, every phase of a call (connect, headers, body) bounded by `timeoutMs`; over
 * `socketPath` (a Unix socket) when given, as the start-up warm-up reaches its stand-in upstream.
 */
export function originPool (origin: string, timeoutMs: number, connections: number, socketPath?: string): Pool {
  return new Pool(origin, { connections, ...bounds(timeoutMs, socketPath) })
}

/** One connection to the origin, bounded as a pool's, for a single request (see TokenEndpoint). */
export function originConnection (origin: string, timeoutMs: number, socketPath?: string): Client {
  return new Client(origin, bounds(timeoutMs, socketPath))
}

function bounds (timeoutMs: number, socketPath: string | undefined): Pick<Pool.Options, 'headersTimeout' | 'bodyTimeout' | 'connect' | 'maxResponseSize' | 'socketPath'> {
  return {
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    connect: { timeout: timeoutMs },
    maxResponseSize: MAX_UPSTREAM_BODY_BYTES,
    ...(socketPath !== undefined && { socketPath })
  }
}
