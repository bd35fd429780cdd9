import type { RedisBus } from './bus.ts'
import type { RedisClient } from './client.ts'
import type { RedisClock } from './clock.ts'
import type { RedisHealth } from './health.ts'
import type { Membership } from './membership.ts'
import type { OwnerLock } from './owner-lock.ts'

/** What the consumers of Redis share: the client, its one health state, its clock, the bus and the owner lock. */
export interface RedisLayer {
  client: RedisClient
  health: RedisHealth
  clock: RedisClock
  bus: RedisBus
  lock: OwnerLock
  /** With UPSTREAM_MAX_RPS set: this instance's place in the fleet's live count. */
  membership?: Membership
}
