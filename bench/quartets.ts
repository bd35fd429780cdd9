import { median } from './stats.ts'
import type { Timed } from './requests.ts'

// The cold-miss phase's quartets (miss.ts): one miss on each target, sent one at a time in turns, and each miss split
// at its upstream call's arrival.

export type Target = 'service' | 'proxy' | 'redisProxy' | 'direct'
/** One miss on each target. */
export type Quartet = Record<Target, Timed>
/** When each of a quartet's misses was sent (monotonicMs), on the clock of the simulator's call times. */
export type SentAt = Record<Target, number>
/**
 * The order of a quartet's misses, from one quartet to the next: a Williams square, so that each target goes first
 * once and follows each other target once (a rotation would have each follow the same one every time).
 */
export const ORDERS: Target[][] = [
  ['service', 'direct', 'redisProxy', 'proxy'],
  ['direct', 'proxy', 'service', 'redisProxy'],
  ['proxy', 'redisProxy', 'direct', 'service'],
  ['redisProxy', 'service', 'proxy', 'direct']
]

/** In ms: from the send to the upstream call's arrival (`before`), and from it to the answer, less the upstream's latency (`after`). */
export interface BeforeAndAfter {
  beforeMs: number
  afterMs: number
}

/** Medians over the run's misses. */
export interface AroundTheCall {
  targets: Record<Target, BeforeAndAfter>
  /** The service's, miss by miss, over the bare proxy's and over the bare Redis proxy's. */
  overProxy: BeforeAndAfter
  overRedisProxy: BeforeAndAfter
}

/**
 * Each miss's time split at its upstream call's arrival (the simulator's call times, one per miss, in the order they
 * were sent, on the same clock as `sentAt`): what a target spends before the call and after its answer. Undefined
 * unless every call falls within its own miss: a miss answered without a call (an error) would shift the rest.
 */
export function aroundTheCall (quartets: Quartet[], sentAt: SentAt[], arrivals: readonly number[], latencyMs: number): AroundTheCall | undefined {
  if (arrivals.length !== quartets.length * ORDERS.length) return undefined
  const split: Array<Record<Target, BeforeAndAfter>> = []
  for (const [index, quartet] of quartets.entries()) {
    const order = ORDERS[index % ORDERS.length] as Target[]
    const sent = sentAt[index] as SentAt
    const around = {} as Record<Target, BeforeAndAfter>
    for (const [position, target] of order.entries()) {
      const arrival = arrivals[index * order.length + position] as number
      const answered = sent[target] + quartet[target].ms
      if (arrival < sent[target] || arrival > answered) return undefined
      around[target] = { beforeMs: arrival - sent[target], afterMs: answered - arrival - latencyMs }
    }
    split.push(around)
  }
  const medians = (of: (around: Record<Target, BeforeAndAfter>) => BeforeAndAfter): BeforeAndAfter =>
    ({ beforeMs: median(split.map((around) => of(around).beforeMs)), afterMs: median(split.map((around) => of(around).afterMs)) })
  const over = (floor: Target) => (around: Record<Target, BeforeAndAfter>): BeforeAndAfter =>
    ({ beforeMs: around.service.beforeMs - around[floor].beforeMs, afterMs: around.service.afterMs - around[floor].afterMs })
  return {
    targets: {
      service: medians((around) => around.service),
      proxy: medians((around) => around.proxy),
      redisProxy: medians((around) => around.redisProxy),
      direct: medians((around) => around.direct)
    },
    overProxy: medians(over('proxy')),
    overRedisProxy: medians(over('redisProxy'))
  }
}
