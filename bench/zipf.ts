/**
 * Deterministic pseudo-random numbers in [0, 1) (mulberry32): the same seed gives the same request mix
 * on every run, so two runs differ by the code under test, not by the dice.
 */
export function seededRandom (seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

/**
 * Ranks 1..n drawn with probability proportional to 1 / rank^s: a few usernames get most page views,
 * a long tail gets one or two. Inverse transform over the cumulative weights (binary search).
 */
export function zipfSampler (n: number, s: number, random: () => number): () => number {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`n must be a positive integer, got ${n}`)
  if (!(s > 0)) throw new RangeError(`s must be positive, got ${s}`)
  const cumulative = new Float64Array(n)
  let total = 0
  for (let rank = 1; rank <= n; rank++) {
    total += 1 / rank ** s
    cumulative[rank - 1] = total
  }
  return () => {
    const target = random() * total
    let low = 0
    let high = n - 1
    while (low < high) {
      const middle = (low + high) >>> 1
      if ((cumulative[middle] as number) <= target) low = middle + 1
      else high = middle
    }
    return low + 1
  }
}
