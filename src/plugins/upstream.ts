import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { Pool } from 'undici'
import { BackoffWindow } from '../upstream/backoff-window.js'
import { CircuitBreaker } from '../upstream/circuit-breaker.js'
import { ConcurrencyLimiter } from '../upstream/concurrency-limiter.js'
import { SharedWindow } from '../redis/shared-window.js'
import { TokenCipher } from '../upstream/token-cipher.js'
import { TokenEndpoint } from '../upstream/token-endpoint.js'
import { TokenManager } from '../upstream/token-manager.js'
import { RedisTokenStore } from '../upstream/token-store.js'
import { UpstreamClient } from '../upstream/upstream-client.js'

declare module 'fastify' {
  interface FastifyInstance {
    tokens: TokenManager
    upstream: UpstreamClient
  }
}

/** Bodies above this are refused: a profile or a timeline is a few KiB. */
export const MAX_UPSTREAM_BODY_BYTES = 1024 * 1024
/** Calls waiting for a slot, per slot: a burst of distinct usernames waits, a stalled upstream does not pile up. */
export const QUEUE_PER_SLOT = 8
/** Failures in a row that open the circuit, and how long it stays open before a probe: one call a second in an outage. */
export const BREAKER_FAILURE_THRESHOLD = 5
export const BREAKER_OPEN_MS = 1_000
/** An exchange is bounded by UPSTREAM_TIMEOUT_MS: the others wait for it that long, and this much more. */
const LOCK_SLACK_MS = 2_000

export interface UpstreamPluginOptions {
  /** The app's clock, for deadlines, the breaker, the back-off window and the token (tests move it). */
  now?: () => number
}

/**
 * Builds the way to the upstream: one keep-alive pool per origin, the token manager (sharing its
 * token through Redis when there is one) and the typed client with its limiter, back-off window and
 * circuit breaker. Closes the pools with the app.
 */
async function upstream (app: FastifyInstance, { now = Date.now }: UpstreamPluginOptions): Promise<void> {
  const { config, redisLayer, telemetry } = app
  const base = new URL(config.UPSTREAM_BASE_URL)
  const auth = new URL(config.AUTH_URL)
  const timeouts = {
    headersTimeout: config.UPSTREAM_TIMEOUT_MS,
    bodyTimeout: config.UPSTREAM_TIMEOUT_MS,
    connect: { timeout: config.UPSTREAM_TIMEOUT_MS },
    maxResponseSize: MAX_UPSTREAM_BODY_BYTES
  }
  const upstreamPool = new Pool(base.origin, { ...timeouts, connections: config.UPSTREAM_MAX_CONCURRENCY })
  // Its own pool even on the same origin: an exchange never waits behind data calls for a connection.
  const authPool = new Pool(auth.origin, { ...timeouts, connections: 2 })

  const prefix = config.CACHE_KEY_PREFIX
  const tokenLog = app.log.child({ component: 'token-manager' })
  const tokens = new TokenManager({
    endpoint: new TokenEndpoint({
      dispatcher: authPool,
      tokenPath: `${trimSlash(auth.pathname)}/oauth/token`,
      clientId: config.CLIENT_ID,
      clientSecret: config.CLIENT_SECRET,
      audience: config.AUDIENCE ?? config.UPSTREAM_BASE_URL,
      defaultTtlSeconds: config.TOKEN_DEFAULT_TTL_SECONDS,
      timeoutMs: config.UPSTREAM_TIMEOUT_MS
    }),
    ...(redisLayer !== undefined && {
      store: new RedisTokenStore({
        redis: redisLayer.client,
        health: redisLayer.health,
        lock: redisLayer.lock,
        cipher: new TokenCipher(config.CLIENT_SECRET),
        keyPrefix: prefix,
        log: tokenLog
      })
    }),
    telemetry,
    log: tokenLog,
    lockWaitMs: config.UPSTREAM_TIMEOUT_MS + LOCK_SLACK_MS,
    now
  })

  const clientLog = app.log.child({ component: 'upstream-client' })
  const client = new UpstreamClient({
    dispatcher: upstreamPool,
    basePath: trimSlash(base.pathname),
    tokens,
    authScheme: config.AUTH_SCHEME,
    timeoutMs: config.UPSTREAM_TIMEOUT_MS,
    limiter: new ConcurrencyLimiter({
      concurrency: config.UPSTREAM_MAX_CONCURRENCY,
      queueLimit: config.UPSTREAM_MAX_CONCURRENCY * QUEUE_PER_SLOT
    }),
    breaker: new CircuitBreaker({ failureThreshold: BREAKER_FAILURE_THRESHOLD, openMs: BREAKER_OPEN_MS, telemetry, now }),
    backoff: new BackoffWindow({
      ...(redisLayer !== undefined && {
        shared: new SharedWindow({
          redis: redisLayer.client,
          health: redisLayer.health,
          key: `${prefix}upstream:backoff`,
          onError: (err) => clientLog.debug({ err }, 'shared back-off window unavailable; using the local one')
        })
      }),
      telemetry,
      now
    }),
    telemetry,
    log: clientLog,
    now
  })

  app.decorate('tokens', tokens)
  app.decorate('upstream', client)
  app.addHook('onClose', async () => {
    await Promise.all([upstreamPool.close(), authPool.close()])
  })
}

function trimSlash (path: string): string {
  return path.replace(/\/+$/, '')
}

export default fp(upstream, { name: 'upstream', dependencies: ['config', 'telemetry', 'redis'] })
