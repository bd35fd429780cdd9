import { connect, type Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import { HOST } from './processes.ts'
import type { Timed } from './requests.ts'

const TIMEOUT_MS = 10_000
const HEADER_END = '\r\n\r\n'

/**
 * `count` requests for `path` written at once on as many connections, opened beforehand and spread
 * round-robin over `ports`. The client is raw sockets and pre-built requests: an HTTP client library
 * spends tens of microseconds a request, which over a thousand requests on two cores would be counted
 * as the service's latency. Each request is timed from its write to the end of its response headers.
 * With `clients` above 1, the requests come from that many addresses, round-robin, as a load balancer
 * names them (`X-Forwarded-For`, which a service trusts with TRUST_PROXY).
 */
export async function socketBurst (ports: number[], path: string, count: number, clients = 1): Promise<Timed[]> {
  const opened = await Promise.allSettled(Array.from({ length: count }, async (_, index) => await open(ports[index % ports.length] as number)))
  const sockets = opened.flatMap((outcome) => outcome.status === 'fulfilled' ? [outcome.value] : [])
  try {
    const failed = opened.find((outcome) => outcome.status === 'rejected')
    if (failed !== undefined) throw new Error(`could not open ${count} connections: ${String(failed.reason)}`)
    const answers = sockets.map((socket, index) => {
      const forwarded = clients > 1 ? `X-Forwarded-For: ${clientAddress(index % clients)}\r\n` : ''
      const request = Buffer.from(`GET ${path} HTTP/1.1\r\nHost: ${HOST}:${ports[index % ports.length]}\r\n${forwarded}\r\n`, 'latin1')
      return awaitHeaders(socket, request)
    })
    return await Promise.all(answers)
  } finally {
    for (const socket of sockets) socket.destroy()
  }
}

/** The `n`th client's address, from 10.0.0.0/8. */
export function clientAddress (n: number): string {
  return `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`
}

async function open (port: number): Promise<Socket> {
  return await new Promise((resolve, reject) => {
    const socket = connect({ host: HOST, port, noDelay: true })
    socket.setTimeout(TIMEOUT_MS, () => socket.destroy(new Error('connect timeout')))
    socket.once('connect', () => { socket.setTimeout(0); resolve(socket) })
    socket.once('error', reject)
  })
}

/** Writes `request` now; resolves with the status and X-Cache once the header block has arrived. */
async function awaitHeaders (socket: Socket, request: Buffer): Promise<Timed> {
  const started = performance.now()
  let head = ''
  const answered = new Promise<Timed>((resolve) => {
    const done = (status: number): void => {
      socket.removeAllListeners('data')
      const xCache = /\r\nx-cache: *([^\r]*)/i.exec(head)?.[1]
      resolve({ status, ms: performance.now() - started, xCache, body: '' })
    }
    socket.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1')
      if (head.includes(HEADER_END)) done(Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0))
    })
    // Status 0: no answer (silence for TIMEOUT_MS, an error, or the server closed the connection).
    socket.setTimeout(TIMEOUT_MS, () => done(0))
    socket.once('error', () => done(0))
    socket.once('close', () => done(0))
  })
  socket.write(request)
  return await answered
}
