import { MemoryDriver } from '../../src/cache/memory-driver.ts'
import { NearCopies } from '../../src/cache/near-copies.ts'
import { SharedTier, type SharedTierOptions, type TierBus } from '../../src/cache/shared-tier.ts'
import { loadBudget } from '../../src/load-budget.ts'
import { unitConfig } from './config.ts'

export interface TestTier {
  tier: SharedTier
  /** What the instance holds alone (while Redis is away, or refused a write). */
  alone: MemoryDriver
}

/**
 * One instance's tier over `driver` and `bus` (and `redis`'s health: up by default), built as the cache builds it: default copies, a store of its own
 * that remembers purges for the default budget's time; errors ignored.
 */
export function sharedTier (
  { driver, bus = quietBus(), redis = { up: true, listen: () => {} }, now = Date.now }: Pick<SharedTierOptions, 'driver'> & Partial<Pick<SharedTierOptions, 'redis' | 'bus'>> & { now?: () => number }
): TestTier {
  const alone = new MemoryDriver({ purgeMemoryMs: loadBudget(unitConfig()).purgeMemoryMs, now })
  const tier = new SharedTier({ driver, redis, bus, copies: new NearCopies({ now }), alone, onError: () => {} })
  return { tier, alone }
}

/** A bus that is up and carries nothing, but what `overrides` hear and send. */
export function quietBus (overrides: Partial<TierBus> = {}): TierBus {
  return { listen: () => {}, publish: async () => {}, ready: true, listenReady: () => {}, listenLost: () => {}, ...overrides }
}
