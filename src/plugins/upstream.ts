import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { BackoffWindow } from '../upstream/backoff-window.ts'
import { CircuitBreaker } from '../upstream/circuit-breaker.ts'
import { ConcurrencyLimiter } from '../upstream/concurrency-limiter.ts'
import { loadBudget } from '../load-budget.ts'
import { originConnection, originPool } from '../upstream/origin-pool.ts'
import { SharedWindow } from '../redis/shared-window.ts'
import { TokenCipher } from '../upstream/token-cipher.ts'
import { TokenEndpoint } from '../upstream/token-endpoint.ts'
import { TokenManager } from '../upstream/token-manager.ts'
import { LONGEST_EXCHANGE_MS } from '../upstream/token-timing.ts'
import { RedisTokenStore } from '../upstream/token-store.ts'
import { RecentLatency } from '../upstream/recent-latency.ts'
import { UpstreamClient } from '../upstream/upstream-client.ts'
import { createUpstreamBudget } from '../upstream/budget/upstream-budget.ts'
import { steadyNow } from '../steady-clock.ts'

declare module 'fastify' {
  interface FastifyInstance {
    tokens: TokenManager
    upstream: UpstreamClient
  }
}

interface UpstreamPluginOptions {
  /** The app's clock, for deadlines, the breaker, the back-off window and the token (tests move it). */
  now?: () => number
  /** Both origins over this Unix socket (the start-up warm-up's stand-in upstream, warm-up.ts). */
  socketPath?: string
}

/** The token manager (a connection of its own per exchange) and the upstream client (a pool, closed with the app). */
async function upstream (app: FastifyInstance, { now = steadyNow, socketPath }: UpstreamPluginOptions): Promise<void> {
  const { config, redisLayer, telemetry } = app
  const limits = loadBudget(config)
  const base = new URL(config.UPSTREAM_BASE_URL)
  const auth = new URL(config.AUTH_URL)
  const upstreamPool = originPool(base.origin, limits.callerMs, config.UPSTREAM_MAX_CONCURRENCY, socketPath)
  // An exchange may run its whole course when callers' time is shorter: they get their 504, the next caller the token.
  const exchangeMs = Math.max(limits.exchangeMs, LONGEST_EXCHANGE_MS)

  const prefix = config.CACHE_KEY_PREFIX
  const tokenLog = app.log.child({ component: 'token-manager' })
  const tokens = new TokenManager({
    endpoint: new TokenEndpoint({
      // Never the data calls' pool, even on the same origin: an exchange never waits behind them for a connection.
      connection: () => originConnection(auth.origin, exchangeMs, socketPath),
      tokenPath: `${trimSlash(auth.pathname)}/oauth/token`,
      clientId: config.CLIENT_ID,
      clientSecret: config.CLIENT_SECRET,
      audience: config.AUDIENCE ?? config.UPSTREAM_BASE_URL,
      defaultTtlSeconds: config.TOKEN_DEFAULT_TTL_SECONDS,
      timeoutMs: exchangeMs
    }),
    ...(redisLayer !== undefined && {
      store: new RedisTokenStore({
        redis: redisLayer.client,
        health: redisLayer.health,
        lock: redisLayer.lock,
        bus: redisLayer.bus,
        cipher: new TokenCipher(config.CLIENT_SECRET),
        keyPrefix: prefix,
        log: tokenLog
      })
    }),
    telemetry,
    log: tokenLog,
    lockWaitMs: limits.exchangeWaitMs,
    now
  })

  const clientLog = app.log.child({ component: 'upstream-client' })
  const limiter = new ConcurrencyLimiter({ concurrency: config.UPSTREAM_MAX_CONCURRENCY })
  telemetry.upstreamLimiter(() => ({ inFlight: limiter.running, queued: limiter.queued }))
  const breaker = new CircuitBreaker({ telemetry, now })
  telemetry.upstreamBreaker(() => breaker.state)
  const client = new UpstreamClient({
    dispatcher: upstreamPool,
    basePath: trimSlash(base.pathname),
    tokens,
    authScheme: config.AUTH_SCHEME,
    callerMs: limits.callerMs,
    limiter,
    latency: new RecentLatency(limits.callerLoadMs),
    breaker,
    backoff: new BackoffWindow({
      ...(redisLayer !== undefined && {
        shared: {
          window: new SharedWindow({
            redis: redisLayer.client,
            health: redisLayer.health,
            key: `${prefix}upstream:backoff`,
            onError: (err) => clientLog.debug({ err }, 'shared back-off window unavailable; using the local one')
          }),
          bus: redisLayer.bus,
          name: `${prefix}upstream:backoff`,
          onError: (err) => clientLog.debug({ err }, 'back-off window not told to the other instances')
        }
      }),
      telemetry,
      now
    }),
    budget: createUpstreamBudget({
      config,
      ...(redisLayer !== undefined && { redis: redisLayer }),
      now,
      telemetry,
      onError: (err) => clientLog.debug({ err }, 'fleet upstream budget unavailable; keeping to this instance\'s share')
    }),
    telemetry,
    log: clientLog,
    now
  })

  app.decorate('tokens', tokens)
  app.decorate('upstream', client)
  app.addHook('onClose', async () => {
    await upstreamPool.close()
  })
}

function trimSlash (path: string): string {
  return path.replace(/\/+$/, '')
}

export default fp(upstream, { name: 'upstream', dependencies: ['config', 'telemetry', 'redis'] })
