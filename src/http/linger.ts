import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import { finished } from 'node:stream/promises'
import { withDeadline } from '../cancellation.ts'

/**
 * How long a connection about to close waits for what its client is still sending: a socket closed with
 * unread data sends a reset, and a client still sending may then lose the answer it was given.
 */
const LINGER_MS = 2_000

/** Resolves once the request's body has been read to its end (and thrown away), or after LINGER_MS. */
export async function bodyDrained (request: IncomingMessage): Promise<void> {
  if (request.complete) return
  request.resume()
  const linger = withDeadline(undefined, LINGER_MS)
  await finished(request, { signal: linger.signal }).catch(() => {})
  linger.clear()
}

/**
 * Writes a whole answer on a socket no response object writes to, and closes it: at once when `cutOff`
 * (a client too slow to wait for), else once the client has closed its side too; after LINGER_MS at the
 * latest, whether the client reads or not.
 */
export function answerAndClose (socket: Duplex, answer: string, cutOff: boolean): void {
  socket.end(answer)
  const linger = setTimeout(() => socket.destroy(), LINGER_MS).unref()
  socket.once('close', () => clearTimeout(linger))
  if (cutOff) socket.once('finish', () => socket.destroy())
  else socket.resume()
}
