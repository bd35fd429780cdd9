import { performance } from 'node:perf_hooks'
import { Pool, request } from 'undici'

/** Per request: no answer within this is counted as an error (status 0), so no phase can hang. */
const REQUEST_TIMEOUT_MS = 10_000

/** One answered (or failed) request: status 0 is a connection error or a timeout. */
export interface Timed {
  status: number
  ms: number
  xCache: string | undefined
  body: string
}

/** Keep-alive connections to one target, for the phases driven request by request. */
export function connectionsTo (url: string, connections: number): Pool {
  return new Pool(url, { connections, headersTimeout: REQUEST_TIMEOUT_MS, bodyTimeout: REQUEST_TIMEOUT_MS })
}

export async function timedGet (pool: Pool, path: string): Promise<Timed> {
  const started = performance.now()
  try {
    const response = await pool.request({ method: 'GET', path })
    const body = await response.body.text()
    const xCache = response.headers['x-cache']
    return { status: response.statusCode, ms: performance.now() - started, xCache: typeof xCache === 'string' ? xCache : undefined, body }
  } catch {
    return { status: 0, ms: performance.now() - started, xCache: undefined, body: '' }
  }
}

/** The paths in order, at most `concurrency` in flight: a steady stream of page views. */
export async function stream (pool: Pool, paths: string[], concurrency: number): Promise<Timed[]> {
  const results: Timed[] = new Array<Timed>(paths.length)
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < paths.length) {
      const index = next++
      results[index] = await timedGet(pool, paths[index] as string)
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, paths.length) }, worker))
  return results
}

/** What the upstream simulator counted (GET /__sim/stats): data calls by `kind:username`, tokens. */
export interface SimulatorCounts {
  dataCalls: number
  tokenRequests: number
  tokensIssued: number
  calls: Record<string, number>
}

export async function simulatorCounts (simulatorUrl: string): Promise<SimulatorCounts> {
  const response = await request(`${simulatorUrl}/__sim/stats`, { headersTimeout: REQUEST_TIMEOUT_MS })
  if (response.statusCode !== 200) throw new Error(`simulator stats answered ${response.statusCode}`)
  return await response.body.json() as SimulatorCounts
}

/** The machine's monotonic clock, in ms: the same in every process here, the simulator's call times included. */
export function monotonicMs (): number {
  return Number(process.hrtime.bigint()) / 1e6
}

/**
 * The arrival time of each data call the simulator counted, from the `from`th on, in order: ms on the machine's
 * monotonic clock (`monotonicMs`), so a harness can set each call between its own send and receive.
 */
export async function callTimes (simulatorUrl: string, from: number): Promise<number[]> {
  const response = await request(`${simulatorUrl}/__sim/call-times?from=${from}`, { headersTimeout: REQUEST_TIMEOUT_MS })
  if (response.statusCode !== 200) throw new Error(`simulator call times answered ${response.statusCode}`)
  return await response.body.json() as number[]
}

/** How many of each status / X-Cache value, e.g. `{ "200": 998, "0": 2 }`. */
export function countBy (results: Timed[], key: (result: Timed) => string): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const result of results) {
    const value = key(result)
    counts[value] = (counts[value] ?? 0) + 1
  }
  return counts
}
