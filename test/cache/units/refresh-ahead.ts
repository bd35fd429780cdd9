import t from 'tap'
import { createEntry } from '../../../src/cache/cache-entry.ts'
import { RefreshAhead } from '../../../src/cache/refresh-ahead.ts'

// Refresh-ahead acts once per entry version, and no earlier than nine tenths into the configured freshness, whatever
// jitter made of the entry's own: at the first hit from there of an entry hot since half of it.

const FRESHNESS_S = [1, 2, 3, 5, 6, 10, 30, 300]
/** Jitter draws: none, some, nearly the most (a tenth shorter: an entry fresh for just over nine tenths). */
const DRAWS = [0, 0.5, 0.999]

for (const freshnessS of FRESHNESS_S) {
  t.test(`${freshnessS} s of freshness: due once, at the first hit from nine tenths of it when hot since half of it, else at the fifth`, async (t) => {
    const freshMs = freshnessS * 1000
    const leadStart = Math.ceil(freshMs * 0.9)
    for (const draw of DRAWS) {
      const refreshAhead = new RefreshAhead()
      const entry = createEntry(200, '"v"', 0, { freshMs, staleMs: 60_000 }, () => draw)
      // Hits throughout its first nine tenths, far more than make it hot: with the most jitter, past 0.81 of it.
      const early = Array.from({ length: 50 }, (_, hit) => refreshAhead.due(entry, freshMs, Math.floor(hit * (leadStart - 1) / 49)))
      t.notOk(early.includes(true), `draw ${draw}: never before nine tenths (${leadStart} ms) of the configured ${freshMs} ms`)
      const lateHits = (counted: typeof refreshAhead, of: typeof entry): number[] => Array.from({ length: 20 }, (_, hit) =>
        counted.due(of, freshMs, leadStart + Math.floor(hit * (of.freshUntil - 1 - leadStart) / 19))).flatMap((due, hit) => due ? [hit + 1] : [])
      t.same(lateHits(refreshAhead, entry), [1], `draw ${draw}: hot since half of it, the first hit from there to the end of its ${entry.freshUntil} ms, and no other`)
      // Asked for only from nine tenths on: hot at its fifth hit there.
      const cold = createEntry(200, '"v"', 0, { freshMs, staleMs: 60_000 }, () => draw)
      t.same(lateHits(new RefreshAhead(), cold), [5], `draw ${draw}: not hot before, the fifth hit from nine tenths`)
    }
  })
}

t.test('a refresh that came to nothing is not asked again for that version; the next version is refreshed once too', async (t) => {
  const refreshAhead = new RefreshAhead()
  const freshness = { freshMs: 3_000, staleMs: 60_000 }
  const first = createEntry(200, '"v1"', 0, freshness, () => 0)
  const hits = (entry: typeof first, at: number): number => Array.from({ length: 100 }, () => refreshAhead.due(entry, freshness.freshMs, at)).filter(Boolean).length
  t.equal(hits(first, 2_700), 1, 'one refresh for the first version, however many hits')
  t.equal(hits(first, 2_999), 0, 'none later, even if the first was refused: the stale path refreshes it')
  const second = createEntry(200, '"v2"', 3_000, freshness, () => 0)
  t.equal(hits(second, 3_000), 0, 'the next version is not due as soon as it is stored')
  t.equal(hits(second, 5_700), 1, 'it is due once, from nine tenths into its own freshness')
})
