import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { Redis } from 'ioredis'

declare module 'fastify' {
  interface FastifyInstance {
    /** The shared Redis client, or undefined when REDIS_URL is unset (in-process cache). */
    redis: Redis | undefined
  }
}

/**
 * A Redis outage must never become the caller's problem: commands fail fast instead of queueing
 * while disconnected, time out quickly, and the client reconnects on its own in the background.
 */
export const REDIS_OPTIONS = {
  connectTimeout: 1_000,
  commandTimeout: 500,
  maxRetriesPerRequest: 1,
  enableOfflineQueue: false,
  enableAutoPipelining: true,
  retryStrategy: (attempt: number) => Math.min(attempt * 200, 2_000)
} as const

/** Owns the Redis client's life: created with the app (start-up never waits for Redis), quit with it. */
async function redis (app: FastifyInstance): Promise<void> {
  const url = app.config.REDIS_URL
  if (url === undefined) {
    app.decorate('redis', undefined)
    return
  }
  const client = new Redis(url, REDIS_OPTIONS)
  // Without a listener ioredis reports connection errors as unhandled; they are expected during an outage.
  client.on('error', (err) => app.log.debug({ err }, 'redis connection error'))
  app.decorate('redis', client)
  app.addHook('onClose', async () => {
    await client.quit().catch(() => client.disconnect())
  })
}

export default fp(redis, { name: 'redis', dependencies: ['config'] })
