import t from 'tap'
import { createEntry } from '../../../src/cache/cache-entry.ts'
import { CacheStack, type Load } from '../../../src/cache/cache-stack.ts'
import { RedisDriver } from '../../../src/cache/redis-driver.ts'
import { loadBudget } from '../../../src/load-budget.ts'
import type { RedisLayer } from '../../../src/redis/layer.ts'
import { RedisClock } from '../../../src/redis/clock.ts'
import { Clock, rawRedis, settle, testLayer, testPrefix, unitConfig, type TestContext } from '../../helper.ts'

// The contract's promise: over a time T with freshness F, at most ceil(T / (0.9 F)) + 1 upstream calls per key for the
// whole deployment (+1 per purge), at every freshness, with refresh-ahead, stale-while-revalidate, a purge and clocks 10
// minutes apart; and no version replaced earlier than 0.9 F after it was stored (but by the purge's revalidation).
// Swept at the cache stack, on a moved clock: each lookup is awaited, its background load too, before the next, so no
// coalescing hides a second refresh of a version.

const FRESHNESS_S = [1, 2, 3, 5, 6, 10, 30, 300]
const WINDOWS = 10
/** Steps of 0.05 F, from one boundary to the next: refresh-ahead's part of a window (0.9 F on) is two of them. */
const STEPS_PER_WINDOW = 20
/** Lookups per step and instance, in turn over the instances: enough to make an entry hot in one step. */
const HOT_HITS = 5
/** Halfway through the sweep, one instance purges the key. */
const PURGE_STEP = 5 * STEPS_PER_WINDOW + 10
/** Loads draw their jitter in turn: none, some, the most (fresh for just over 0.9 F). */
const DRAWS = [0, 0.5, 0.999]
const STALE_MS = 86_400_000
const budget = loadBudget(unitConfig())

const DEPLOYMENTS = [
  { name: 'one instance, in-process store', shared: false, skewsMs: [0] },
  { name: 'three instances on one Redis, one clock', shared: true, skewsMs: [0, 0, 0] },
  { name: 'three instances on one Redis, clocks 10 minutes apart', shared: true, skewsMs: [0, 600_000, -600_000] }
]

/** An instance: its cache, its own clock (the sweep's, `skewMs` off), and the load its lookups pass. */
interface Instance {
  cache: CacheStack
  load: Load
}

/**
 * An instance's cache at freshness `freshMs`, on `layer` (absent: in-process only). Redis's clock is the sweep's: the
 * instance's offset to it is exactly its skew (measuring an offset is RedisClock's own job, test/redis/clock.ts).
 */
function instance (clock: Clock, skewMs: number, freshMs: number, layer: RedisLayer | undefined, calls: number[], errors: unknown[]): Instance {
  const now = (): number => clock.now() + skewMs
  const redisClock = new RedisClock(now)
  redisClock.sync(['0', '0'], skewMs, skewMs)
  const cache = new CacheStack({
    ...(layer !== undefined && {
      shared: {
        driver: new RedisDriver({ redis: layer.client, health: layer.health, clock: redisClock, purgeMemoryMs: budget.purgeMemoryMs }),
        redis: layer.health,
        bus: layer.bus,
        claim: async (key: string) => await layer.lock.claim(key)
      }
    }),
    budget,
    now,
    freshMs: () => freshMs,
    telemetry: { cacheResult: () => {}, coalescedWaiter: () => {} },
    onError: (error) => { errors.push(error) }
  })
  const load: Load = async () => {
    calls.push(clock.now())
    const draw = DRAWS[calls.length % DRAWS.length] ?? 0
    return createEntry(200, `"v${calls.length}"`, now(), { freshMs, staleMs: STALE_MS }, () => draw)
  }
  return { cache, load }
}

/** Redis's command bound here: the sweep counts calls, and a machine too busy to answer in 500 ms must not send an instance alone (test/redis/hang.ts covers that). */
const PATIENT_COMMAND_MS = 10_000

/** Three instances' Redis layers on the shared Redis, each with its own connection, bus subscription and lock. */
async function layers (t: TestContext, prefix: string): Promise<RedisLayer[]> {
  return await Promise.all([0, 1, 2].map(async () => await testLayer(t, rawRedis(t), prefix, undefined, PATIENT_COMMAND_MS)))
}

/** The sweep of one deployment at one freshness: the sweep's clock at each call to the upstream. */
async function sweep (instances: Instance[], clock: Clock, key: string, freshMs: number): Promise<void> {
  const stepMs = freshMs / STEPS_PER_WINDOW
  for (let step = 0; step <= WINDOWS * STEPS_PER_WINDOW; step++) {
    if (step > 0) clock.advance(stepMs)
    // Lets Redis's replies and the health's probes in: a run of hits alone would starve them.
    await settle()
    if (step === PURGE_STEP) await instances[step % instances.length]?.cache.markStale([key])
    for (let lookup = 0; lookup < HOT_HITS * instances.length; lookup++) {
      const { cache, load } = instances[lookup % instances.length] as Instance
      // A hit held here answers at once: awaited only when it is a promise (each await costs, swept 50,000 times).
      const served = cache.lookup(key, 'profile', load)
      if (served instanceof Promise) await served
      // A refresh or revalidation it started (in this instance's process) is stored before the next lookup.
      await cache.settled(10_000)
    }
  }
}

/** Calls less than 0.9 F after the one before, but the first after the purge (its own). */
function early (calls: number[], freshMs: number, purgedAt: number): number[] {
  return calls.filter((at, index) => {
    const previous = calls[index - 1]
    const purgesCall = previous !== undefined && previous < purgedAt && at >= purgedAt
    return previous !== undefined && !purgesCall && at - previous < 0.9 * freshMs
  })
}

for (const { name, shared, skewsMs } of DEPLOYMENTS) {
  t.test(`${name}: at most ceil(T / 0.9 F) + 1 calls (+1 per purge) at every freshness, no version replaced before 0.9 F`, async (t) => {
    const prefix = testPrefix(t)
    const redisLayers = shared ? await layers(t, prefix) : []
    // Redis reported down (a busy machine starving the event loop past a command's bound) sends instances alone: another promise.
    let downs = 0
    for (const layer of redisLayers) layer.health.listen((up) => { if (!up) downs++ })
    const started = performance.now()
    let worst = ''
    for (const freshnessS of FRESHNESS_S) {
      const freshMs = freshnessS * 1000
      const clock = new Clock()
      const start = clock.now()
      const calls: number[] = []
      const errors: unknown[] = []
      const instances = skewsMs.map((skewMs, index) => instance(clock, skewMs, freshMs, redisLayers[index], calls, errors))
      await sweep(instances, clock, `${prefix}v1:{bound-${freshnessS}}:profile`, freshMs)
      for (const { cache } of instances) cache.close()
      const elapsedMs = clock.now() - start
      t.same(errors, [], `${freshnessS} s: no store or revalidation failed`)
      t.equal(downs, 0, `${freshnessS} s: Redis stayed up throughout`)
      const bound = Math.ceil(elapsedMs / (0.9 * freshMs)) + 1 + 1
      const purgedAt = start + PURGE_STEP * freshMs / STEPS_PER_WINDOW
      t.ok(calls.length <= bound, `${freshnessS} s: ${calls.length} calls in ${WINDOWS} windows, at most ${bound}`)
      t.ok(calls.length >= WINDOWS, `${freshnessS} s: refreshed every window (${calls.length} calls), never left to expire`)
      t.same(early(calls, freshMs, purgedAt).map((at) => (at - start) / freshMs), [], `${freshnessS} s: no call within 0.9 F of the one before but the purge's`)
      if (worst === '' || calls.length - bound > Number(worst.split(' ')[0])) worst = `${calls.length - bound} (${calls.length} of ${bound} at ${freshnessS} s)`
    }
    t.comment(`${name}: worst calls less bound ${worst}; ${Math.round(performance.now() - started)} ms`)
  })
}
