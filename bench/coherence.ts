import { request } from 'undici'
import { sampleValues } from './metrics.ts'
import type { ProcessGroup, RunningChild } from './processes.ts'
import { startService, type Simulator } from './targets.ts'

const INSTANCES = 3
const HOT_USERNAMES = 20
const PURGES = 200
const ADMIN_TOKEN = 'bench-coherence-admin-token'
const HISTOGRAM = 'pbff_purge_propagation_seconds'

/** Issue 35 point 5: how soon a purge on one instance reaches the others. */
export interface CoherenceResult {
  instances: number
  purges: number
  /** Purge events applied (one per key of a username: profile and timeline), summed over the instances. */
  applied: number
  /** The histogram's p99 and p50, as the upper bound of the bucket that holds them, and its mean, in ms. */
  p99Ms: number
  p50Ms: number
  meanMs: number
  /** Each receiver's own: an error in one instance's offset to Redis's clock shifts all it receives (and clamps what it sends). */
  byInstance: Array<Pick<CoherenceResult, 'applied' | 'p99Ms' | 'p50Ms' | 'meanMs'>>
  /** Right after each purge's answer, the other instances asked for the username: STALE is coherent, HIT is not (yet). */
  answersAfter: Record<string, number>
}

/** Three instances on the shared Redis, hot usernames held by each, purged one after another on each instance in turn. */
export async function coherencePhase (
  { group, simulator, logLevel, redisUrl, keyPrefix }: { group: ProcessGroup, simulator: Simulator, logLevel: string, redisUrl: string, keyPrefix: string }
): Promise<CoherenceResult> {
  const redis = { url: redisUrl, keyPrefix: `${keyPrefix}coherence:` }
  const instances = await Promise.all(Array.from({ length: INSTANCES }, async (_, index) =>
    await startService(group, { name: `service-coherence-${index}`, simulator, logLevel, redis, env: { ADMIN_TOKEN, RATE_LIMIT_PER_MINUTE: '0' } })))
  try {
    const usernames = Array.from({ length: HOT_USERNAMES }, (_, index) => `coherence-${index}`)
    for (const instance of instances) for (const username of usernames) await get(instance, username)
    const answersAfter: Record<string, number> = {}
    for (let purge = 0; purge < PURGES; purge++) {
      const username = usernames[purge % HOT_USERNAMES] as string
      const purger = instances[purge % INSTANCES] as RunningChild
      // Each instance holds a fresh copy before the purge (a revalidation after the last one has run).
      for (const instance of instances) await get(instance, username)
      const res = await request(`${purger.url}/admin/purge/${username}`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
      await res.body.dump()
      if (res.statusCode !== 200) throw new Error(`purge answered ${res.statusCode}`)
      for (const instance of instances.filter((each) => each !== purger)) {
        const state = await get(instance, username)
        answersAfter[state] = (answersAfter[state] ?? 0) + 1
      }
    }
    const texts = await Promise.all(instances.map(async (instance) => await metrics(instance)))
    return { instances: INSTANCES, purges: PURGES, ...merged(texts), byInstance: texts.map((text) => merged([text])), answersAfter }
  } finally {
    await Promise.all(instances.map(async (instance) => await instance.stop()))
  }
}

export function coherenceSection ({ coherence }: { coherence?: CoherenceResult }): string[] {
  if (coherence === undefined) return []
  const { instances, purges, applied, p99Ms, p50Ms, meanMs, byInstance, answersAfter } = coherence
  return [
    '',
    `## Coherence: a purge on one of ${instances} instances reaching the others (issue 35)`,
    '',
    `${purges} purges of hot usernames, each instance in turn; ${applied} purge events applied. Propagation on Redis's clock ` +
      `(\`${HISTOGRAM}\`, bucket bounds): p50 <= ${p50Ms} ms, p99 <= ${p99Ms} ms (goal: 10 ms), mean ${meanMs.toFixed(2)} ms; by receiver ` +
      `${byInstance.map((each) => `p99 <= ${each.p99Ms} ms, mean ${each.meanMs.toFixed(2)} ms`).join('; ')}. ` +
      `The other instances asked right after each purge's answer: ${Object.entries(answersAfter).map(([state, n]) => `${state} ${n}`).join(', ')}.`
  ]
}

async function get (instance: RunningChild, username: string): Promise<string> {
  const res = await request(`${instance.url}/profile/${username}`)
  await res.body.dump()
  if (res.statusCode !== 200) throw new Error(`${instance.name} answered ${res.statusCode} for ${username}`)
  return String(res.headers['x-cache'])
}

async function metrics (instance: RunningChild): Promise<string> {
  const res = await request(`${instance.url}/metrics`)
  return await res.body.text()
}

/** The instances' histograms summed, and the bucket bounds holding the median and the 99th percentile. */
function merged (texts: string[]): Pick<CoherenceResult, 'applied' | 'p99Ms' | 'p50Ms' | 'meanMs'> {
  const buckets = new Map<number, number>()
  let count = 0
  let sum = 0
  for (const text of texts) {
    for (const { labels, value } of sampleValues(text, `${HISTOGRAM}_bucket`)) {
      const bound = labels.le === '+Inf' ? Infinity : Number(labels.le)
      buckets.set(bound, (buckets.get(bound) ?? 0) + value)
    }
    count += sampleValues(text, `${HISTOGRAM}_count`)[0]?.value ?? 0
    sum += sampleValues(text, `${HISTOGRAM}_sum`)[0]?.value ?? 0
  }
  const bounds = [...buckets.entries()].sort(([a], [b]) => a - b)
  const quantile = (q: number): number => 1000 * (bounds.find(([, cumulative]) => cumulative >= q * count)?.[0] ?? Infinity)
  return { applied: count, p99Ms: quantile(0.99), p50Ms: quantile(0.5), meanMs: count === 0 ? 0 : 1000 * sum / count }
}
