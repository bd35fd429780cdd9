import t from 'tap'
import { createClient } from '../src/index.ts'

t.test('an option that would remove a bound is refused at once, by name', async (t) => {
  // `Number(process.env.X)` of an unset or mistyped setting is NaN: the held versions grew without bound.
  for (const maxHeld of [Number.NaN, Number.POSITIVE_INFINITY, -1, 2.5]) {
    t.throws(() => createClient({ baseUrl: 'http://bff.test', maxHeld }), { name: 'TypeError', message: /^maxHeld / }, String(maxHeld))
  }
  for (const timeoutMs of [Number.NaN, Number.POSITIVE_INFINITY, -1, 0]) {
    t.throws(() => createClient({ baseUrl: 'http://bff.test', timeoutMs }), { name: 'TypeError', message: /^timeoutMs / }, String(timeoutMs))
  }
  for (const options of [{ maxHeld: 0 }, { maxHeld: 1000 }, { timeoutMs: 2500 }, { timeoutMs: 0.5 }]) {
    t.doesNotThrow(() => createClient({ baseUrl: 'http://bff.test', ...options }), JSON.stringify(options))
  }
})
