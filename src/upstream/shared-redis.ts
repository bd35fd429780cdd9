import type { RedisCommander } from 'ioredis'

/**
 * The Redis commands the upstream classes use: a standalone client and a Cluster both provide them, and
 * every script touches one key, so it runs on a cluster too.
 */
export type SharedRedis = Pick<RedisCommander, 'eval' | 'set' | 'pttl'>
