import { Cluster, Redis } from 'ioredis'

/** A single Redis or a Redis Cluster: both speak the commands the service uses, and both have `status`. */
export type RedisClient = Redis | Cluster

/**
 * A Redis outage must never become the caller's problem: commands fail fast instead of queueing
 * while disconnected, time out quickly (a timeout marks Redis down, see RedisHealth), and the client
 * reconnects on its own in the background.
 */
export const REDIS_OPTIONS = {
  connectTimeout: 1_000,
  commandTimeout: 500,
  // A command whose connection drops fails at once: the caller goes local rather than wait for a reconnection.
  maxRetriesPerRequest: 0,
  enableOfflineQueue: false,
  enableAutoPipelining: true,
  retryStrategy: (attempt: number) => Math.min(attempt * 200, 2_000)
} as const

/**
 * With REDIS_CLUSTER, REDIS_URL names one seed node: the client discovers the others. The same
 * fail-fast options apply (per node where the Cluster client takes them per node), and the credentials
 * and TLS of the URL are used for every node. A cluster has no databases, so a `/db` path is ignored.
 */
export function createRedisClient (url: string, cluster: boolean): RedisClient {
  if (!cluster) return new Redis(url, REDIS_OPTIONS)
  const seed = new URL(url)
  const { retryStrategy, enableOfflineQueue, enableAutoPipelining, ...nodeOptions } = REDIS_OPTIONS
  return new Cluster([{ host: seed.hostname.replace(/^\[|\]$/g, ''), port: Number(seed.port || 6379) }], {
    enableOfflineQueue,
    enableAutoPipelining,
    clusterRetryStrategy: retryStrategy,
    slotsRefreshTimeout: nodeOptions.connectTimeout,
    redisOptions: {
      ...nodeOptions,
      ...(seed.username !== '' && { username: decodeURIComponent(seed.username) }),
      ...(seed.password !== '' && { password: decodeURIComponent(seed.password) }),
      ...(seed.protocol === 'rediss:' && { tls: {} })
    }
  })
}

/** A second connection with the same settings (a subscriber cannot send ordinary commands). */
export function duplicateRedisClient (client: RedisClient): RedisClient {
  return client instanceof Cluster ? client.duplicate() : client.duplicate()
}
