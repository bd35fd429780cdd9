import type { IncomingHttpHeaders } from 'node:http'
import autocannon, { type Instance } from 'autocannon'
import { percentile } from './stats.ts'

export interface LoadOptions {
  connections: number
  seconds: number
  /** Requests per second over all connections; unset: as fast as the target answers. */
  rate?: number
}

/** One autocannon round against one target. Latencies are ours (sub-millisecond), not autocannon's whole ms. */
export interface RoundResult {
  requestsPerSecond: number
  p50Ms: number
  p99Ms: number
  responses: number
  /** Connection errors and timeouts. */
  errors: number
  non2xx: number
  /** Responses by status code, e.g. `{ "200": 51234, "503": 12 }`. */
  statusCodes: Record<string, number>
  /** X-Cache values seen, `none` when the header is absent (the bare app sends none). */
  xCache: Record<string, number>
  /** The server's CPU time per response in µs (what a response costs it, whatever else the machine runs); NaN where unknown. */
  serverCpuUs: number
}

/** Ends whichever round is running: Ctrl-C and the run's deadline call it. */
let running: Instance | undefined
export function stopRunningLoad (): void {
  running?.stop()
}

/**
 * Drives `url` for `seconds` over `connections` keep-alive connections, each cycling through `paths`.
 * Every target gets the same callbacks, so the load generator costs the same whichever one it drives.
 */
export async function runRound (
  { url, cpuMs }: { url: string, cpuMs?: () => number | undefined }, paths: string[], { connections, seconds, rate }: LoadOptions
): Promise<RoundResult> {
  const cpuBefore = cpuMs?.()
  const xCache: Record<string, number> = {}
  const latencies: number[] = []
  const onResponse = (_status: number, _body: string, _context: unknown, headers: IncomingHttpHeaders | undefined): void => {
    const value = headers?.['x-cache']
    const name = typeof value === 'string' ? value : 'none'
    xCache[name] = (xCache[name] ?? 0) + 1
  }
  let finished: (error: unknown, result: autocannon.Result) => void = () => {}
  const done = new Promise<autocannon.Result>((resolve, reject) => {
    finished = (error, result) => { if (error === null || error === undefined) resolve(result); else reject(error) }
  })
  const instance = autocannon({
    url,
    connections,
    duration: seconds,
    timeout: 10,
    ...(rate !== undefined && { overallRate: rate }),
    requests: paths.map((path) => ({ method: 'GET', path, onResponse }))
  }, (error, result) => { finished(error, result) })
  instance.on('response', (_client: unknown, _status: number, _bytes: number, responseTimeMs: number) => {
    latencies.push(responseTimeMs)
  })
  running = instance
  try {
    const result = await done
    const cpuAfter = cpuMs?.()
    return {
      requestsPerSecond: result.requests.average,
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
      responses: latencies.length,
      errors: result.errors,
      non2xx: result.non2xx,
      statusCodes: Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, { count }]) => [code, Number(count)])),
      xCache,
      serverCpuUs: cpuBefore === undefined || cpuAfter === undefined ? Number.NaN : (cpuAfter - cpuBefore) * 1000 / latencies.length
    }
  } finally {
    running = undefined
  }
}
