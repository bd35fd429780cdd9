import type { RedisBus } from './bus.js'
import type { RedisClient } from './client.js'
import type { RedisClock } from './clock.js'
import type { RedisHealth } from './health.js'
import type { OwnerLock } from './owner-lock.js'

/** What the consumers of Redis share: the client, its one health state, its clock, the bus and the owner lock. */
export interface RedisLayer {
  client: RedisClient
  health: RedisHealth
  clock: RedisClock
  bus: RedisBus
  lock: OwnerLock
}
