import { connect } from 'node:net'
import { HOST } from './processes.ts'
import type { FloorCheck } from './results.ts'

const TIMEOUT_MS = 10_000
/** Headers whose value is the answer's own. */
const PER_ANSWER = new Set(['date', 'x-request-id'])

/** One HTTP/1.1 response as it came off the socket. */
export interface RawResponse {
  /** Header names, lower-cased, in the order sent. */
  names: string[]
  headers: Record<string, string>
  head: Buffer
  body: Buffer
}

/**
 * The floor is only a floor if it sends what a hit sends: two requests to each, on one keep-alive connection as
 * wrk sends them, compared byte for byte (the body), by name (the headers) and by size (the whole answer).
 */
export async function checkFloor (service: { port: number, path: string }, floor: { port: number, path: string }): Promise<FloorCheck> {
  const hits = await rawGets(service.port, service.path, 2)
  const floors = await rawGets(floor.port, floor.path, 2)
  return compareAnswers(hits, floors)
}

export function compareAnswers (hits: RawResponse[], floors: RawResponse[]): FloorCheck {
  const [hit, secondHit] = hits
  const [floor, secondFloor] = floors
  if (hit === undefined || secondHit === undefined || floor === undefined || secondFloor === undefined) throw new Error('two answers of each are compared')
  const fresh = (a: RawResponse, b: RawResponse): boolean => a.headers['x-request-id'] !== undefined && a.headers['x-request-id'] !== b.headers['x-request-id']
  // Values that differ beyond what is meant to (the date, the request id): each with the hit's value, then the floor's.
  const differing = hit.names.filter((name) => !PER_ANSWER.has(name) && floor.headers[name] !== undefined && floor.headers[name] !== hit.headers[name])
  return {
    hitHeaders: hit.names,
    differingValues: differing.map((name) => `${name}: ${hit.headers[name]} / ${floor.headers[name]}`),
    floorHeaders: floor.names,
    hitBytes: hit.head.length + hit.body.length,
    floorBytes: floor.head.length + floor.body.length,
    bodyBytes: hit.body.length,
    sameBody: hit.body.equals(floor.body),
    freshRequestIds: fresh(hit, secondHit) && fresh(floor, secondFloor)
  }
}

/** Parses the head of a response (status line and headers, without the blank line). */
export function parseHead (head: string): { names: string[], headers: Record<string, string> } {
  const names: string[] = []
  const headers: Record<string, string> = {}
  for (const line of head.split('\r\n').slice(1)) {
    const colon = line.indexOf(':')
    if (colon <= 0) continue
    const name = line.slice(0, colon).trim().toLowerCase()
    names.push(name)
    headers[name] = line.slice(colon + 1).trim()
  }
  return { names, headers }
}

/** `count` GETs of `path`, one after the other on one keep-alive connection (responses with a content-length only). */
async function rawGets (port: number, path: string, count: number): Promise<RawResponse[]> {
  const socket = connect({ host: HOST, port, noDelay: true })
  socket.setTimeout(TIMEOUT_MS, () => socket.destroy(new Error(`no answer from ${HOST}:${port}${path} within ${TIMEOUT_MS} ms`)))
  const responses: RawResponse[] = []
  try {
    let buffered = Buffer.alloc(0)
    const chunks = socket[Symbol.asyncIterator]() as AsyncIterator<Buffer>
    for (let index = 0; index < count; index++) {
      socket.write(`GET ${path} HTTP/1.1\r\nHost: ${HOST}:${port}\r\n\r\n`)
      for (;;) {
        const end = buffered.indexOf('\r\n\r\n')
        if (end >= 0) {
          const { names, headers } = parseHead(buffered.subarray(0, end).toString('latin1'))
          const length = Number(headers['content-length'])
          if (!Number.isInteger(length)) throw new Error(`${HOST}:${port}${path} answered without a content-length`)
          if (buffered.length >= end + 4 + length) {
            responses.push({ names, headers, head: buffered.subarray(0, end + 4), body: buffered.subarray(end + 4, end + 4 + length) })
            buffered = buffered.subarray(end + 4 + length)
            break
          }
        }
        const next = await chunks.next()
        if (next.done === true) throw new Error(`${HOST}:${port} closed the connection`)
        buffered = Buffer.concat([buffered, next.value])
      }
    }
    return responses
  } finally {
    socket.destroy()
  }
}
