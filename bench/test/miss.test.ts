import t from 'tap'
import { aroundTheCall } from '../miss.ts'
import type { Timed } from '../requests.ts'

// The split of a miss at its upstream call: arrivals come in the order the misses were sent, which changes from one
// quartet to the next (the Williams square), so a split that read them in a fixed order would swap the targets' times.

const timed = (ms: number): Timed => ({ status: 200, ms, xCache: undefined, body: '' })

/** A target's miss: sent at `sent`, its call arriving `beforeMs` later, answered the upstream's 20 ms plus `afterMs` after that. */
const miss = (sent: number, beforeMs: number, afterMs: number): { sent: number, arrival: number, timed: Timed } =>
  ({ sent, arrival: sent + beforeMs, timed: timed(beforeMs + 20 + afterMs) })

/** Four quartets sent in the harness's orders, each target with its own before and after. */
function quartets (): Parameters<typeof aroundTheCall> {
  const orders = [
    ['service', 'direct', 'redisProxy', 'proxy'],
    ['direct', 'proxy', 'service', 'redisProxy'],
    ['proxy', 'redisProxy', 'direct', 'service'],
    ['redisProxy', 'service', 'proxy', 'direct']
  ] as const
  const costs = { service: [1.5, 2.5], direct: [0.2, 0.5], proxy: [0.7, 1], redisProxy: [1, 1.4] } as const
  const all: Array<ReturnType<typeof miss> & { target: string, quartet: number }> = []
  let clock = 1_000
  orders.forEach((order, quartet) => {
    for (const target of order) {
      const [before, after] = costs[target]
      const one = miss(clock, before, after)
      all.push({ ...one, target, quartet })
      clock += one.timed.ms + 1
    }
  })
  const byQuartet = orders.map((_, quartet) => Object.fromEntries(all.filter((one) => one.quartet === quartet).map((one) => [one.target, one])))
  return [
    byQuartet.map((quartet) => Object.fromEntries(Object.entries(quartet).map(([target, one]) => [target, one.timed]))),
    byQuartet.map((quartet) => Object.fromEntries(Object.entries(quartet).map(([target, one]) => [target, one.sent]))),
    all.map((one) => one.arrival)
  ] as Parameters<typeof aroundTheCall>
}

t.test('each miss is split at its own call, whatever the order the quartet was sent in', async (t) => {
  const split = aroundTheCall(...quartets())
  const rounded = (value: { beforeMs: number, afterMs: number }): number[] => [value.beforeMs, value.afterMs].map((ms) => Math.round(ms * 1000) / 1000)
  t.same(rounded(split.targets.service), [1.5, 2.5])
  t.same(rounded(split.targets.direct), [0.2, 0.5])
  t.same(rounded(split.targets.proxy), [0.7, 1])
  t.same(rounded(split.targets.redisProxy), [1, 1.4])
  t.same(rounded(split.overProxy), [0.8, 1.5])
  t.same(rounded(split.overRedisProxy), [0.5, 1.1])
})

t.test('no split when the calls are not one per miss', async (t) => {
  const [misses, sentAt, arrivals] = quartets()
  t.throws(() => aroundTheCall(misses, sentAt, arrivals.slice(1)), /15 upstream calls for 4 quartets/)
})
