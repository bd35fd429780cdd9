import t from 'tap'
import { cacheStack, roundTripsOf } from '../../helper.ts'

t.test('a cold miss waits for two Redis round trips: the read that claims its load, and the write that tells and releases', async (t) => {
  const { app, sim } = await cacheStack(t)
  await app.inject({ url: '/profile/warm-up', remoteAddress: '10.0.0.1' }) // the token and the first compilation: not a cold miss's cost
  // A client not seen before: its first count goes to Redis beside the read, and the request must not wait for it.
  const miss = await roundTripsOf(app, '/profile/cold-trips', '10.0.0.2')
  t.equal(miss.statusCode, 200)
  t.equal(miss.cache, 'MISS')
  t.equal(sim.callsFor('profile', 'cold-trips'), 1)
  t.ok(miss.awaited <= 2, `${miss.awaited} awaited round trips (${miss.commands.join(' ')})`)
  const hit = await roundTripsOf(app, '/profile/cold-trips', '10.0.0.1')
  t.equal(hit.cache, 'HIT')
  t.equal(hit.awaited, 0, 'a hit held here waits for none')
})
