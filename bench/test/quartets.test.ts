import t from 'tap'
import { aroundTheCall, ORDERS } from '../quartets.ts'
import type { Timed } from '../requests.ts'
import type { Quartet, SentAt, Target } from '../quartets.ts'

// The split of a miss at its upstream call: arrivals come in the order the misses were sent, which changes from one
// quartet to the next (the Williams square), so a split that read them in a fixed order would swap the targets' times.

type Args = [Quartet[], SentAt[], number[]]

/** Each target's before and after, in ms, at the middle of the spread that `quartets` puts around them. */
const COSTS: Record<Target, [number, number]> = { service: [1.5, 2.5], direct: [0.2, 0.5], proxy: [0.7, 1], redisProxy: [1, 1.4] }
const LATENCY_MS = 20

/**
 * Seven quartets sent in the harness's orders (more than one turn of the square), each miss's call arriving its
 * target's before after the send, answered the upstream's 20 ms and its after later; quartet k adds (k - 3) / 100 ms (the last 5 ms more) to
 * both, so the medians are the costs above and the means and extremes are not.
 */
function quartets (): Args {
  const misses: Quartet[] = []
  const sentAt: SentAt[] = []
  const arrivals: number[] = []
  let clock = 1_000
  for (let index = 0; index < 7; index++) {
    const shift = (index - 3) / 100 + (index === 6 ? 5 : 0)
    const quartet = {} as Record<Target, Timed>
    const sent = {} as Record<Target, number>
    for (const target of ORDERS[index % ORDERS.length] as Target[]) {
      const [before, after] = COSTS[target]
      sent[target] = clock
      arrivals.push(clock + before + shift)
      quartet[target] = { status: 200, ms: before + LATENCY_MS + after + 2 * shift, xCache: undefined, body: '' }
      clock += quartet[target].ms + 1
    }
    misses.push(quartet)
    sentAt.push(sent)
  }
  return [misses, sentAt, arrivals]
}

const rounded = (value: { beforeMs: number, afterMs: number } | undefined): number[] =>
  value === undefined ? [] : [value.beforeMs, value.afterMs].map((ms) => Math.round(ms * 1000) / 1000)

t.test('each miss is split at its own call, whatever the order the quartet was sent in', async (t) => {
  const split = aroundTheCall(...quartets(), LATENCY_MS)
  for (const target of ['service', 'direct', 'proxy', 'redisProxy'] as const) t.same(rounded(split?.targets[target]), COSTS[target], target)
  t.same(rounded(split?.overProxy), [0.8, 1.5])
  t.same(rounded(split?.overRedisProxy), [0.5, 1.1])
})

t.test('no split when the calls are not one per miss, each within it', async (t) => {
  const [misses, sentAt, arrivals] = quartets()
  t.equal(aroundTheCall(misses, sentAt, arrivals.slice(1), LATENCY_MS), undefined, 'one call missing')
  // As many calls as misses, but one miss answered without a call and another miss with two: the count hides it.
  const shifted = [...arrivals.slice(0, 5), arrivals[5] as number, ...arrivals.slice(5, -1)]
  t.equal(aroundTheCall(misses, sentAt, shifted, LATENCY_MS), undefined, 'a call outside its miss')
})
