import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { Pool } from 'undici'
import { TokenManager } from '../upstream/token-manager.js'
import { UpstreamClient } from '../upstream/upstream-client.js'

declare module 'fastify' {
  interface FastifyInstance {
    tokens: TokenManager
    upstream: UpstreamClient
  }
}

/** Bodies above this are refused: a profile or a timeline is a few KiB. */
export const MAX_UPSTREAM_BODY_BYTES = 1024 * 1024

/**
 * Builds the way to the upstream: one keep-alive pool per origin (the identity provider may live on
 * another one), the token manager and the typed client. Closes the pools with the app.
 */
async function upstream (app: FastifyInstance): Promise<void> {
  const { config } = app
  const base = new URL(config.UPSTREAM_BASE_URL)
  const auth = new URL(config.AUTH_URL)
  const poolOptions = {
    connections: config.UPSTREAM_MAX_CONCURRENCY,
    headersTimeout: config.UPSTREAM_TIMEOUT_MS,
    bodyTimeout: config.UPSTREAM_TIMEOUT_MS,
    connect: { timeout: config.UPSTREAM_TIMEOUT_MS },
    maxResponseSize: MAX_UPSTREAM_BODY_BYTES
  }
  const upstreamPool = new Pool(base.origin, poolOptions)
  const authPool = auth.origin === base.origin ? upstreamPool : new Pool(auth.origin, { ...poolOptions, connections: 2 })

  const tokens = new TokenManager({
    dispatcher: authPool,
    tokenPath: `${trimSlash(auth.pathname)}/oauth/token`,
    clientId: config.CLIENT_ID,
    clientSecret: config.CLIENT_SECRET,
    audience: config.AUDIENCE ?? config.UPSTREAM_BASE_URL,
    defaultTtlSeconds: config.TOKEN_DEFAULT_TTL_SECONDS,
    timeoutMs: config.UPSTREAM_TIMEOUT_MS
  })
  const client = new UpstreamClient({
    dispatcher: upstreamPool,
    basePath: trimSlash(base.pathname),
    tokens,
    authScheme: config.AUTH_SCHEME,
    timeoutMs: config.UPSTREAM_TIMEOUT_MS
  })

  app.decorate('tokens', tokens)
  app.decorate('upstream', client)
  app.addHook('onClose', async () => {
    await Promise.all([upstreamPool.close(), authPool === upstreamPool ? undefined : authPool.close()])
  })
}

function trimSlash (path: string): string {
  return path.replace(/\/+$/, '')
}

export default fp(upstream, { name: 'upstream', dependencies: ['config'] })
