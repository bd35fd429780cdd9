import type { IncomingMessage } from 'node:http'
import { finished } from 'node:stream/promises'

/**
 * How long an answer that will close its connection waits for the rest of the request's body: a socket
 * closed with unread data sends a reset, and a client still sending may then lose the answer.
 */
const LINGER_MS = 2_000

/** Resolves once the request's body has been read to its end (and thrown away), or after LINGER_MS. */
export async function bodyDrained (request: IncomingMessage): Promise<void> {
  if (request.complete) return
  request.resume()
  await finished(request, { signal: AbortSignal.timeout(LINGER_MS) }).catch(() => {})
}
