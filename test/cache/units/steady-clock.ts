import t from 'tap'
import { profileOf } from '../../../dev/profiles.ts'
import { anotherApp, simulator, testConfig, untilRedisReady } from '../../helper.ts'

const HOUR_MS = 3_600_000

// The app's own clock (no clock injected): a step of the host's clock, as NTP or an operator makes one, is not time passing.
for (const store of ['redis', 'memory'] as const) {
  for (const stepMs of [HOUR_MS, -HOUR_MS]) {
    t.test(`${store}: the host's clock stepped ${stepMs > 0 ? 'forward' : 'back'} an hour neither ages nor refreshes what is held`, async (t) => {
      // The host's clock as Date.now reads it, stepped below: in place before the app is built, which may keep a reference to it.
      const hostNow = Date.now
      let hostStepMs = 0
      Date.now = () => hostNow() + hostStepMs
      t.teardown(() => { Date.now = hostNow })
      const sim = await simulator(t)
      const app = await anotherApp(t, testConfig(t, sim, store === 'memory' ? { REDIS_URL: '' } : {}))
      if (store === 'redis') await untilRedisReady(app, 1)
      const first = await app.inject('/profile/alice')
      t.equal(first.headers['x-cache'], 'MISS')

      hostStepMs = stepMs

      const after = await app.inject('/profile/alice')
      t.equal(after.statusCode, 200)
      t.same(after.json(), { user: profileOf('alice') })
      t.equal(after.headers['x-cache'], 'HIT', 'still fresh: its freshness (5 min) is less than the step')
      t.equal(after.headers.age, '0')
      // Whole seconds: the real time between the two requests may cross one (an hour's step would show as 3,600).
      const maxAge = (res: typeof first): number => Number(/max-age=(\d+)/.exec(String(res.headers['cache-control']))?.[1])
      t.ok(maxAge(first) - maxAge(after) <= 1 && maxAge(after) <= maxAge(first), `the same freshness left: ${maxAge(first)} s, then ${maxAge(after)} s`)
      t.equal(sim.callsFor('profile', 'alice'), 1, 'no revalidation')
    })
  }
}
