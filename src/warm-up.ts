import { randomBytes } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { performance } from 'node:perf_hooks'
import { buildApp } from './app.ts'
import { untilAborted, withDeadline } from './cancellation.ts'
import { loadConfig, type Config } from './config.ts'
import { PROFILE_FIELDS } from './schemas/profile.ts'

/** Usernames loaded (at once, as a herd's waiters arrive), then hits on them, one after another. */
const MISSES = 200
const HITS = 1_000
/** The whole warm-up's limit: a rollout waits for it, and Kubernetes' startup probe gives a pod 30 s to listen. */
const WARM_UP_LIMIT_MS = 20_000

const STAND_IN_PROFILE = JSON.stringify({ user: Object.fromEntries(PROFILE_FIELDS.map((field) => [field, 'warm-up'])) })
const STAND_IN_TOKEN = JSON.stringify({ access_token: 'warm-up', token_type: 'Bearer', expires_in: 3600 })

/** How long the warm-up took, or why it stopped (the instance then starts cold, as it did before). */
export type WarmUp = { ms: number } | { error: unknown }

/**
 * Compiles the request path before the instance listens: a throwaway app answers misses and hits from a stand-in
 * upstream in this process, so that V8 has optimized what every request runs when a fresh instance meets its first
 * herd (a fresh instance's burst cost twice the CPU a request: docs/performance-history.md, issue 33). Run before the
 * real app is built, so that nothing of it (tracing's provider included) exists yet; its app has no Redis, no
 * secret, no tracing and logs nothing, and the stand-in listens on no TCP port.
 */
export async function warmUp (config: Config, socketPath = abstractSocketPath(), limitMs = WARM_UP_LIMIT_MS): Promise<WarmUp> {
  const started = performance.now()
  const limit = withDeadline(undefined, limitMs)
  const standIn = createServer(answerAsUpstream)
  try {
    await listen(standIn, socketPath)
    const app = await buildApp({ config: throwawayConfig(config, limitMs), upstreamSocketPath: socketPath })
    try {
      const missing = Promise.all(Array.from({ length: MISSES }, async (_, index) => await app.inject(`/profile/warm-up-${index}`)))
      // Past the limit nobody reads them, and however they end is no unhandled rejection.
      missing.catch(() => {})
      const misses = await untilAborted(missing, limit.signal)
      for (const miss of misses) expectAnswer(miss, 'MISS')
      for (let index = 0; index < HITS; index++) {
        limit.signal.throwIfAborted()
        expectAnswer(await app.inject(`/profile/warm-up-${index % MISSES}`), 'HIT')
      }
    } finally {
      await app.close()
    }
    return { ms: Math.round(performance.now() - started) }
  } catch (error) {
    return { error }
  } finally {
    limit.clear()
    standIn.close()
  }
}

/** Linux's abstract namespace: no file to write (the image's root is read-only), and no TCP port anyone could reach. */
function abstractSocketPath (): string {
  return `\0profile-bff-warm-up-${process.pid}-${randomBytes(6).toString('hex')}`
}

/** Only the settings that shape a request's path (the rest are defaults): nothing secret, nothing leaves the process. */
function throwawayConfig (config: Config, limitMs: number): Config {
  return loadConfig({
    UPSTREAM_BASE_URL: 'http://warm-up.invalid',
    AUTH_URL: 'http://warm-up.invalid',
    CLIENT_ID: 'warm-up',
    CLIENT_SECRET: 'warm-up',
    LOG_LEVEL: 'silent',
    CORS_ORIGINS: config.CORS_ORIGINS,
    TRUST_PROXY: String(config.TRUST_PROXY),
    // Each request may take the warm-up's whole time: a caller's 5 s cut it short with 504s on a starved machine.
    UPSTREAM_TIMEOUT_MS: String(limitMs),
    // Past the limit, its close waits no longer than a second for the loads under way.
    SHUTDOWN_TIMEOUT_MS: '1000',
    // The rate limit's code runs as in the real app, its limit out of the warm-up's reach.
    RATE_LIMIT_PER_MINUTE: config.RATE_LIMIT_PER_MINUTE === 0 ? '0' : String(Number.MAX_SAFE_INTEGER)
  })
}

/** A warm-up whose answers are not what the path serves would have compiled something else: it stops. */
function expectAnswer ({ statusCode, headers, body }: { statusCode: number, headers: Record<string, unknown>, body: string }, cache: string): void {
  if (statusCode !== 200 || headers['x-cache'] !== cache) throw new Error(`the warm-up was answered ${statusCode} ${String(headers['x-cache'])}, not 200 ${cache}: ${body.slice(0, 200)}`)
}

async function listen (server: Server, path: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    // Kept after listening: a later error (an accept failing) then settles nothing rather than going uncaught.
    server.on('error', reject)
    server.listen(path, resolve)
  })
}

/** A token for the exchange, a profile for every other request: the request path's shape, not its data. */
function answerAsUpstream (request: IncomingMessage, response: ServerResponse): void {
  const body = request.method === 'POST' ? STAND_IN_TOKEN : STAND_IN_PROFILE
  request.resume()
  response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
  response.end(body)
}
