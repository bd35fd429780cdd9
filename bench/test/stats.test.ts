import t from 'tap'
import { median, percentile } from '../stats.ts'
import { seededRandom, zipfSampler } from '../zipf.ts'

// The benchmark's own arithmetic: if it is wrong, every figure in bench/results/latest.md is.

t.test('median and percentile', async (t) => {
  t.equal(median([3, 1, 2]), 2)
  t.equal(median([4, 1, 3, 2]), 2.5)
  t.ok(Number.isNaN(median([])))
  const hundred = Array.from({ length: 100 }, (_, index) => 100 - index)
  t.equal(percentile(hundred, 50), 50)
  t.equal(percentile(hundred, 99), 99)
  t.equal(percentile(hundred, 100), 100)
  t.equal(percentile([7], 99), 7)
  t.ok(Number.isNaN(percentile([], 50)))
})

t.test('the Zipf sampler is deterministic, stays in range and favours low ranks', async (t) => {
  const draw = (seed: number): number[] => {
    const sample = zipfSampler(1_000, 1.1, seededRandom(seed))
    return Array.from({ length: 20_000 }, sample)
  }
  const ranks = draw(42)
  t.same(ranks.slice(0, 50), draw(42).slice(0, 50), 'same seed, same sequence')
  t.not(ranks.slice(0, 50).join(), draw(43).slice(0, 50).join(), 'another seed, another sequence')
  t.ok(ranks.every((rank) => Number.isInteger(rank) && rank >= 1 && rank <= 1_000))
  const count = (rank: number): number => ranks.filter((value) => value === rank).length
  // P(1) / P(2) = 2^1.1 ≈ 2.14, and rank 1 holds 1 / H(1000, 1.1) ≈ 17% of the draws.
  t.ok(count(1) / count(2) > 1.8 && count(1) / count(2) < 2.5, `rank 1 / rank 2 = ${count(1) / count(2)}`)
  t.ok(count(1) / ranks.length > 0.15 && count(1) / ranks.length < 0.2, `rank 1 share ${count(1) / ranks.length}`)
  t.ok(new Set(ranks).size > 500, 'a long tail')
  t.throws(() => zipfSampler(0, 1.1, Math.random), RangeError)
  t.throws(() => zipfSampler(10, 0, Math.random), RangeError)
})
