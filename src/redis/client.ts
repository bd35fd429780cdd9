import { Cluster, Redis, type RedisOptions } from 'ioredis'
import { untilAborted, withDeadline } from '../cancellation.ts'
import type { Config } from '../config.ts'

/** A single Redis or a Redis Cluster: both speak the commands the service uses, and both have `status`. */
export type RedisClient = Redis | Cluster

/**
 * A Redis outage must never become the caller's problem: commands fail fast instead of queueing
 * while disconnected, time out quickly (RedisHealth bounds each, and a timeout marks Redis down), and the client
 * reconnects on its own in the background.
 */
export const REDIS_OPTIONS = {
  connectTimeout: 1_000,
  // Past RedisHealth's bound, which decides for callers (its own ends after the sockets are read): this one bounds what
  // that does not see, a reconnection's handshake, SUBSCRIBE and the bus's PING, so that a connection to a hung server
  // is dropped and made again (to the new primary, with Sentinels). At 500 ms it also failed answers read late by a
  // held-up process.
  commandTimeout: 2_000,
  // A dropped connection's socket is destroyed if it has not closed by then (ioredis waits 2 s by default): a hung
  // server never closes it, and its queue fails, and the reconnection starts, only once it is gone.
  disconnectTimeout: 100,
  // A command whose connection drops fails at once: the caller goes local rather than wait for a reconnection.
  maxRetriesPerRequest: 0,
  enableOfflineQueue: false,
  // Each command written as it is issued: per-turn batches cost CPU, held a herd's claim behind the arrivals and
  // broke traces (docs/performance-history.md).
  enableAutoPipelining: false,
  retryStrategy: (attempt: number) => Math.min(attempt * 200, 2_000)
} as const

export type RedisSettings = Pick<Config, 'REDIS_CLUSTER' | 'REDIS_SENTINELS' | 'REDIS_SENTINEL_NAME' | 'REDIS_SENTINEL_PASSWORD'>

/**
 * With REDIS_CLUSTER, REDIS_URL names one seed node: the client discovers the others. The same
 * fail-fast options apply (per node where the Cluster client takes them per node), and the credentials
 * and TLS of the URL are used for every node. A cluster has no databases, so a `/db` path is ignored.
 * With REDIS_SENTINELS, the Sentinels name the primary (see `sentinelOptions`).
 */
export function createRedisClient (url: string, settings: RedisSettings): RedisClient {
  if (settings.REDIS_SENTINELS !== undefined && settings.REDIS_SENTINEL_NAME !== undefined) {
    return new Redis(url, { ...REDIS_OPTIONS, ...sentinelOptions(new URL(url), settings.REDIS_SENTINELS, settings.REDIS_SENTINEL_NAME, settings.REDIS_SENTINEL_PASSWORD) })
  }
  if (!settings.REDIS_CLUSTER) return new Redis(url, REDIS_OPTIONS)
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

/**
 * ioredis's own Sentinel support: each (re)connection asks the Sentinels for the primary, and a failover drops every
 * connection (the old primary dies, the Sentinels kill its clients as they demote it, or, hung, RedisHealth and
 * RedisBus drop them). Without ioredis's `failoverDetector`, whose connections to the Sentinels outlive `quit()` and
 * report their errors as unhandled.
 * The URL's host is ignored; its credentials, database and TLS are the primary's (and, with TLS, the Sentinels' too).
 */
function sentinelOptions (url: URL, sentinels: string, name: string, sentinelPassword: string | undefined): RedisOptions {
  const tls = url.protocol === 'rediss:'
  return {
    sentinels: sentinels.split(',').map((address) => {
      const at = address.lastIndexOf(':')
      return { host: address.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(address.slice(at + 1)) }
    }),
    name,
    ...(sentinelPassword !== undefined && { sentinelPassword }),
    sentinelRetryStrategy: REDIS_OPTIONS.retryStrategy,
    ...(tls && { enableTLSForSentinelMode: true, sentinelTLS: {} })
  }
}

/**
 * A second connection with the same settings, Sentinels included (a subscriber cannot send ordinary commands). Not
 * resubscribed by ioredis, which leaves its SUBSCRIBE's failure unhandled (a process-ending rejection when the new
 * connection drops at once): its owner subscribes on every `ready` (RedisBus).
 */
export function duplicateRedisClient (client: RedisClient): RedisClient {
  if (client instanceof Redis) return client.duplicate({ autoResubscribe: false })
  const duplicate: () => RedisClient = client.duplicate
  return duplicate.call(client)
}

/** How long a QUIT waits for its answer: a hung Redis never gives it, and nothing else bounds it. */
const QUIT_WAIT_MS = 500

/** QUIT, so that Redis has every command sent before it; the connection dropped when no answer comes in time. */
export async function quitOrDrop (client: RedisClient): Promise<void> {
  const limit = withDeadline(undefined, QUIT_WAIT_MS)
  try {
    await untilAborted(client.quit(), limit.signal)
  } catch {
    client.disconnect()
  } finally {
    limit.clear()
  }
}
