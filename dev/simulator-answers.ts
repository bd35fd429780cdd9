import type { IncomingMessage, ServerResponse } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'

// How the simulator answers: its faults, and JSON in and out.

export type Fault =
  | { kind: 'status', status: number, retryAfter?: string }
  | { kind: 'invalid-json', body?: string }
  /** Answers 200 with these bytes as they are (invalid UTF-8 included). */
  | { kind: 'raw', body: Uint8Array }
  | { kind: 'wrong-shape' }
  | { kind: 'oversized', bytes: number }
  | { kind: 'hang' }
  /** Answers 200 at once, then sends the body a byte at a time, never finishing: only a total timeout ends it. */
  | { kind: 'trickle' }
  | { kind: 'reset' }

const MAX_BODY = 64 * 1024

export async function applyFault (res: ServerResponse, fault: Fault): Promise<void> {
  switch (fault.kind) {
    case 'status':
      res.writeHead(fault.status, {
        'content-type': 'application/json',
        ...(fault.retryAfter !== undefined && { 'retry-after': fault.retryAfter })
      })
      res.end(JSON.stringify({ error: `simulated ${fault.status}`, secret_detail: 'upstream body must never reach callers' }))
      return
    case 'invalid-json':
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(fault.body ?? '{"user": {"name": "trunc')
      return
    case 'raw':
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': fault.body.byteLength })
      res.end(fault.body)
      return
    case 'wrong-shape':
      return sendJson(res, 200, { data: { unexpected: true } })
    case 'oversized':
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ user: { name: 'x'.repeat(fault.bytes) } }))
      return
    case 'hang':
      await sleep(60_000, undefined, { ref: false })
      res.end()
      return
    case 'trickle': {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write('{"user":')
      const drip = setInterval(() => res.write(' '), 20)
      res.once('close', () => clearInterval(drip))
      return
    }
    case 'reset':
      res.socket?.destroy()
  }
}

export async function readJson (req: IncomingMessage): Promise<Record<string, unknown> | undefined> {
  let text = ''
  for await (const chunk of req) {
    text += String(chunk)
    if (text.length > MAX_BODY) return undefined
  }
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === 'object' && value !== null ? value as Record<string, unknown> : undefined
  } catch {
    return undefined
  }
}

export function sendJson (res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}
