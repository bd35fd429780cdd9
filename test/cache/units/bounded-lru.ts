import t from 'tap'
import { boundedLru, setUntil } from '../../../src/cache/bounded-lru.ts'

function clock (start = 1_000): { now: () => number, advance: (ms: number) => void } {
  let time = start
  return { now: () => time, advance: (ms) => { time += ms } }
}

t.test('a value is gone at its expiresAt on the injected clock, not a millisecond later', async (t) => {
  const { now, advance } = clock()
  const lru = boundedLru<string>({ maxEntries: 10, now })
  setUntil(lru, 'k', 'v', now() + 100)
  advance(99)
  t.equal(lru.get('k'), 'v')
  advance(1)
  t.equal(lru.get('k'), undefined)
  setUntil(lru, 'past', 'v', now())
  t.equal(lru.size, 0, 'an already expired value is not stored')
})

t.test('past either bound the least recently used go first; a value above the byte budget is not kept', async (t) => {
  const { now } = clock()
  const lru = boundedLru<string>({ maxEntries: 3, maxBytes: 10, sizeOf: (value) => value.length, now })
  for (const key of ['a', 'b', 'c']) setUntil(lru, key, 'xx', now() + 1_000)
  lru.get('a')
  setUntil(lru, 'd', 'xx', now() + 1_000)
  t.same([...lru.keys()].sort(), ['a', 'c', 'd'], 'the entry bound evicts b, the least recently used')
  setUntil(lru, 'e', 'xxxxxx', now() + 1_000)
  t.ok(lru.calculatedSize <= 10, `${lru.calculatedSize} bytes`)
  t.equal(lru.get('e'), 'xxxxxx')
  setUntil(lru, 'a', 'x'.repeat(11), now() + 1_000)
  t.equal(lru.get('a'), undefined, 'too large for the whole budget: not kept, and the old value is gone too')
})
