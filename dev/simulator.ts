import { randomBytes } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { profileOf, timelineOf } from './profiles.ts'
import { applyFault, readJson, sendJson, type Fault } from './simulator-answers.ts'

export type { Fault } from './simulator-answers.ts'

/**
 * A stand-in for the Public Profile Lookup Service and its identity provider, in one small node:http
 * server. It checks credentials, issues expiring tokens, refuses missing, wrong and expired ones, and
 * can be told to be slow or to fail, so that tests and benchmarks can drive every path. It counts what
 * it sees, which is what the tests assert on.
 *
 * Unknown members (answered 404): every username that starts with `ghost`.
 */

export interface SimulatorOptions {
  port?: number
  host?: string
  clientId?: string
  clientSecret?: string
  /** Required `audience`; default: the simulator's own base URL. */
  audience?: string
  /** Path the upstream routes live under, e.g. `/gw/v1`. */
  basePath?: string
  tokenTtlSeconds?: number
  /** Leave `expires_in` out of token answers. */
  omitExpiresIn?: boolean
  latencyMs?: number
  tokenLatencyMs?: number
  /** The clock tokens expire by (tests pass the app's); default Date.now. */
  now?: () => number
  /**
   * Called on each data call as it arrives; what it returns is appended to every field and post of that call's answer,
   * so a test can tell which call (and which version of a member) a body it is served came from.
   */
  mark?: (call: DataCall) => string
}

export interface DataCall {
  kind: 'profile' | 'timeline' | 'user'
  username: string
}

export interface SimulatorStats {
  tokensIssued: number
  tokenRequests: number
  /** Data calls by route kind and username, e.g. `profile:alice`. */
  calls: Map<string, number>
  dataCalls: number
  /** Data calls answered at once at the most (held by the latency): how parallel the caller's loads were. */
  peakDataCallsInFlight: number
  rejectedTokens: number
  expiredTokensSeen: number
  /** Responses whose connection closed before they were complete: the client gave up (or a reset fault). */
  abortedResponses: number
  lastTokenRequest?: Record<string, unknown>
  lastAuthorization?: string
  lastPath?: string
  /** The W3C `traceparent` of the last data call and of the last token request (a traced service sends one). */
  lastTraceparent?: string
  lastTokenTraceparent?: string
}

export interface Simulator {
  url: string
  authUrl: string
  baseUrl: string
  options: Required<Omit<SimulatorOptions, 'audience' | 'mark'>> & { audience: string }
  stats: SimulatorStats
  /** Faults for the next data calls (each one consumed once), or `always` until cleared. */
  failNext: (fault: Fault, times?: number) => void
  failAlways: (fault: Fault | undefined) => void
  failTokenNext: (fault: Fault, times?: number) => void
  /** Forget every issued token: the next call with one answers 401, as after a key rotation. */
  revokeTokens: () => void
  callsFor: (kind: 'profile' | 'timeline' | 'user', username: string) => number
  reset: () => void
  close: () => Promise<void>
}

export async function startSimulator (input: SimulatorOptions = {}): Promise<Simulator> {
  const tokens = new Map<string, number>()
  const dataFaults: Fault[] = []
  const tokenFaults: Fault[] = []
  let alwaysFault: Fault | undefined
  const stats = freshStats()
  /**
   * When each data call arrived, in order: GET /__sim/call-times?from=N answers those from the Nth on. In ms on the machine's
   * monotonic clock, the same in every process here, so a harness can set each call between its own send and receive.
   */
  const callTimes: number[] = []
  let inFlight = 0

  const server = createServer((req, res) => {
    res.once('close', () => { if (!res.writableFinished) stats.abortedResponses++ })
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500)
      res.end()
    })
  })
  server.keepAliveTimeout = 5_000

  await new Promise<void>((resolve) => server.listen(input.port ?? 0, input.host ?? '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const url = `http://${input.host ?? '127.0.0.1'}:${port}`
  const basePath = (input.basePath ?? '').replace(/\/$/, '')
  const options = {
    port,
    host: input.host ?? '127.0.0.1',
    clientId: input.clientId ?? 'dev-client',
    clientSecret: input.clientSecret ?? 'dev-secret',
    audience: input.audience ?? `${url}${basePath}`,
    basePath,
    tokenTtlSeconds: input.tokenTtlSeconds ?? 3600,
    omitExpiresIn: input.omitExpiresIn ?? false,
    latencyMs: input.latencyMs ?? 0,
    tokenLatencyMs: input.tokenLatencyMs ?? 0,
    now: input.now ?? Date.now
  }

  async function handle (req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { pathname, searchParams } = new URL(req.url ?? '/', url)
    if (req.method === 'POST' && pathname === '/oauth/token') return await issueToken(req, res)
    if (req.method === 'POST' && pathname === '/__sim/config') return await configure(req, res)
    if (req.method === 'GET' && pathname === '/__sim/stats') return sendJson(res, 200, statsJson())
    if (req.method === 'GET' && pathname === '/__sim/call-times') return sendJson(res, 200, callTimes.slice(Number(searchParams.get('from') ?? 0)))
    if (req.method !== 'GET' || !pathname.startsWith(`${basePath}/`)) return sendJson(res, 404, { error: 'no such route' })

    const route = matchRoute(pathname.slice(basePath.length))
    if (route === undefined) return sendJson(res, 404, { error: 'no such route' })
    stats.dataCalls++
    callTimes.push(Number(process.hrtime.bigint()) / 1e6)
    stats.lastPath = req.url
    stats.lastAuthorization = req.headers.authorization
    stats.lastTraceparent = req.headers.traceparent?.toString()
    const callKey = `${route.kind}:${route.username}`
    stats.calls.set(callKey, (stats.calls.get(callKey) ?? 0) + 1)
    const mark = input.mark?.(route) ?? ''

    inFlight++
    stats.peakDataCallsInFlight = Math.max(stats.peakDataCallsInFlight, inFlight)
    try {
      if (options.latencyMs > 0) await sleep(options.latencyMs)
    } finally {
      inFlight--
    }
    if (!authorized(req.headers.authorization)) return sendJson(res, 401, { error: 'invalid_token' })
    const fault = dataFaults.shift() ?? alwaysFault
    if (fault !== undefined) return applyFault(res, fault)
    if (route.username.startsWith('ghost')) return sendJson(res, 404, { error: 'user not found' })

    if (route.kind === 'timeline') return sendJson(res, 200, { posts: timelineOf(route.username).map((post) => post + mark) })
    const profile = Object.fromEntries(Object.entries(profileOf(route.username)).map(([key, value]) => [key, value + mark]))
    if (route.kind === 'profile') return sendJson(res, 200, { user: profile })
    const field = Object.keys(profile).find((key) => key.toLowerCase() === searchParams.get('query'))
    if (field === undefined) return sendJson(res, 400, { error: 'unknown query' })
    return sendJson(res, 200, { [field]: profile[field] })
  }

  async function issueToken (req: IncomingMessage, res: ServerResponse): Promise<void> {
    stats.tokenRequests++
    stats.lastTokenTraceparent = req.headers.traceparent?.toString()
    const body = await readJson(req)
    stats.lastTokenRequest = body
    if (options.tokenLatencyMs > 0) await sleep(options.tokenLatencyMs)
    const fault = tokenFaults.shift()
    if (fault !== undefined) return applyFault(res, fault)
    if (body?.grant_type !== 'client_credentials') return sendJson(res, 400, { error: 'unsupported_grant_type' })
    if (body.client_id !== options.clientId || body.client_secret !== options.clientSecret) {
      return sendJson(res, 401, { error: 'invalid_client' })
    }
    if (body.audience !== options.audience) return sendJson(res, 403, { error: 'invalid_audience' })
    const token = `sim_${randomBytes(24).toString('base64url')}`
    tokens.set(token, options.now() + options.tokenTtlSeconds * 1000)
    stats.tokensIssued++
    const answer: Record<string, unknown> = { access_token: token, token_type: 'Bearer' }
    if (!options.omitExpiresIn) answer.expires_in = options.tokenTtlSeconds
    sendJson(res, 200, answer)
  }

  async function configure (req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readJson(req) ?? {}
    if (typeof body.latencyMs === 'number') options.latencyMs = body.latencyMs
    if (typeof body.tokenTtlSeconds === 'number') options.tokenTtlSeconds = body.tokenTtlSeconds
    if (body.reset === true) simulator.reset()
    if ('fault' in body) simulator.failAlways(body.fault as Fault | undefined)
    sendJson(res, 200, statsJson())
  }

  function authorized (header: string | undefined): boolean {
    const token = header?.replace(/^Bearer /, '')
    const expiresAt = token === undefined ? undefined : tokens.get(token)
    if (expiresAt === undefined) {
      stats.rejectedTokens++
      return false
    }
    if (expiresAt <= options.now()) {
      stats.expiredTokensSeen++
      stats.rejectedTokens++
      return false
    }
    return true
  }

  function statsJson (): Record<string, unknown> {
    return { ...stats, calls: Object.fromEntries(stats.calls) }
  }

  const simulator: Simulator = {
    url,
    authUrl: url,
    baseUrl: `${url}${basePath}`,
    options,
    stats,
    failNext: (fault, times = 1) => { for (let i = 0; i < times; i++) dataFaults.push(fault) },
    failAlways: (fault) => { alwaysFault = fault },
    failTokenNext: (fault, times = 1) => { for (let i = 0; i < times; i++) tokenFaults.push(fault) },
    revokeTokens: () => tokens.clear(),
    callsFor: (kind, username) => stats.calls.get(`${kind}:${username}`) ?? 0,
    reset: () => {
      dataFaults.length = 0
      tokenFaults.length = 0
      alwaysFault = undefined
      callTimes.length = 0
      Object.assign(stats, freshStats())
    },
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
  return simulator
}

function freshStats (): SimulatorStats {
  return { tokensIssued: 0, tokenRequests: 0, calls: new Map(), dataCalls: 0, peakDataCallsInFlight: 0, rejectedTokens: 0, expiredTokensSeen: 0, abortedResponses: 0 }
}

function matchRoute (path: string): { kind: 'profile' | 'timeline' | 'user', username: string } | undefined {
  const segments = path.split('/').slice(1)
  const username = segments[1] === undefined ? undefined : decodeURIComponent(segments[1])
  if (username === undefined || username === '') return undefined
  if (segments[0] === 'profile' && segments.length === 2) return { kind: 'profile', username }
  if (segments[0] === 'profile' && segments.length === 3 && segments[2] === 'timeline') return { kind: 'timeline', username }
  if (segments[0] === 'user' && segments.length === 2) return { kind: 'user', username }
  return undefined
}
