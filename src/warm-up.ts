import { randomBytes } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { performance } from 'node:perf_hooks'
import type { FastifyBaseLogger } from 'fastify'
import { buildApp } from './app.ts'
import type { Config } from './config.ts'
import { PROFILE_FIELDS } from './schemas/profile.ts'

/** Usernames loaded (at once, as a herd's waiters arrive), then hits on them, one after another. */
const MISSES = 200
const HITS = 1_000

const STAND_IN_PROFILE = JSON.stringify({ user: Object.fromEntries(PROFILE_FIELDS.map((field) => [field, 'warm-up'])) })
const STAND_IN_TOKEN = JSON.stringify({ access_token: 'warm-up', token_type: 'Bearer', expires_in: 3600 })

/**
 * Compiles the request path before the instance listens: a throwaway app (in-process store, no Redis, no tracing,
 * nothing logged) answers misses and hits from a stand-in upstream in this process, so that V8 has optimized what
 * every request runs when a fresh instance meets its first herd (a fresh instance's burst cost twice the CPU a
 * request: docs/performance-history.md, issue 33). Nothing reaches the real upstream, Redis, the logs or the metrics.
 * A warm-up that fails is skipped: the instance starts cold, as it did before.
 */
export async function warmUp (config: Config, log: FastifyBaseLogger, socketPath = abstractSocketPath()): Promise<void> {
  const started = performance.now()
  const standIn = createServer(answerAsUpstream)
  try {
    await listen(standIn, socketPath)
    const app = await buildApp({ config: throwawayConfig(config), upstreamSocketPath: socketPath })
    try {
      await Promise.all(Array.from({ length: MISSES }, async (_, index) => await app.inject(`/profile/warm-up-${index}`)))
      for (let index = 0; index < HITS; index++) await app.inject(`/profile/warm-up-${index % MISSES}`)
    } finally {
      await app.close()
    }
    log.info({ ms: Math.round(performance.now() - started) }, 'warmed up: the request path is compiled')
  } catch (err) {
    log.warn({ err }, 'warm-up skipped: the first requests run on code not compiled yet')
  } finally {
    standIn.close()
  }
}

/** Linux's abstract namespace: no file to write (the image's root is read-only), and no TCP port anyone could reach. */
function abstractSocketPath (): string {
  return `\0profile-bff-warm-up-${process.pid}-${randomBytes(6).toString('hex')}`
}

/** The same settings with everything that leaves the process turned off, and the rate limit out of reach. */
function throwawayConfig (config: Config): Config {
  const {
    REDIS_URL: _redis, REDIS_SENTINELS: _sentinels, REDIS_SENTINEL_NAME: _name, REDIS_SENTINEL_PASSWORD: _password,
    OTEL_EXPORTER_OTLP_ENDPOINT: _tracing, AUDIENCE: _audience, ...local
  } = config
  return {
    ...local,
    REDIS_CLUSTER: false,
    UPSTREAM_BASE_URL: 'http://warm-up.invalid',
    AUTH_URL: 'http://warm-up.invalid',
    UPSTREAM_MAX_RPS: 0,
    RATE_LIMIT_PER_MINUTE: config.RATE_LIMIT_PER_MINUTE === 0 ? 0 : Number.MAX_SAFE_INTEGER,
    LOG_LEVEL: 'silent'
  }
}

async function listen (server: Server, path: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(path, () => {
      server.off('error', reject)
      resolve()
    })
  })
}

/** A token for the exchange, a profile for every other request: the request path's shape, not its data. */
function answerAsUpstream (request: IncomingMessage, response: ServerResponse): void {
  const body = request.method === 'POST' ? STAND_IN_TOKEN : STAND_IN_PROFILE
  request.resume()
  response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
  response.end(body)
}
