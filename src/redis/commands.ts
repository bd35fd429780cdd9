import type { RedisCommander } from 'ioredis'

/**
 * The commands the service sends: a single Redis and a Cluster both have them, and every script
 * touches keys of one hash slot, so it runs on a cluster too.
 */
export type RedisCommands = Pick<RedisCommander, 'eval' | 'get' | 'set' | 'pttl' | 'publish' | 'ping' | 'time' | 'hgetall'>
