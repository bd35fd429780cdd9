import t from 'tap'
import { profileOf, timelineOf } from '../../../dev/profiles.ts'
import { PROFILE_FIELDS } from '../../../src/schemas/profile.ts'
import { cacheStack } from '../../helper.ts'

for (const store of ['redis', 'memory'] as const) {
  const env: Record<string, string> = store === 'redis' ? {} : { REDIS_URL: '' }

  t.test(`${store}: field queries after a profile load make no upstream call`, async (t) => {
    const { app, sim } = await cacheStack(t, { env })
    const profile = await app.inject('/profile/carol')
    t.equal(profile.headers['x-cache'], 'MISS')
    for (const field of PROFILE_FIELDS) {
      const res = await app.inject(`/user/carol?query=${field.toUpperCase()}`)
      t.equal(res.statusCode, 200, field)
      t.same(res.json(), { [field]: profileOf('carol')[field] }, field)
      t.equal(res.headers['x-cache'], 'HIT', field)
    }
    t.equal(sim.callsFor('profile', 'carol'), 1)
    t.equal(sim.callsFor('user', 'carol'), 0, 'the upstream\'s /user route is never called')
  })

  t.test(`${store}: a field query on a miss loads the whole profile once, for every field`, async (t) => {
    const { app, sim } = await cacheStack(t, { env, sim: { latencyMs: 50 } })
    const answers = await Promise.all(PROFILE_FIELDS.map((field) => app.inject(`/user/dave?query=${field.toLowerCase()}`)))
    t.same(answers.map((res) => res.json()), PROFILE_FIELDS.map((field) => ({ [field]: profileOf('dave')[field] })))
    t.equal(sim.callsFor('profile', 'dave'), 1)
    const profile = await app.inject('/profile/dave')
    t.equal(profile.headers['x-cache'], 'HIT')
    t.equal(sim.callsFor('profile', 'dave'), 1)
  })

  t.test(`${store}: a field's ETag follows its profile's, and a field of an unknown member is 404`, async (t) => {
    const { app } = await cacheStack(t, { env })
    const profile = await app.inject('/profile/erin')
    const credits = await app.inject('/user/erin?query=credits')
    const name = await app.inject('/user/erin?query=name')
    t.not(credits.headers.etag, name.headers.etag)
    t.equal(String(credits.headers.etag).slice(0, -1).startsWith(String(profile.headers.etag).slice(0, -1)), true)
    const notModified = await app.inject({ url: '/user/erin?query=credits', headers: { 'if-none-match': String(credits.headers.etag) } })
    t.equal(notModified.statusCode, 304)
    const otherField = await app.inject({ url: '/user/erin?query=name', headers: { 'if-none-match': String(credits.headers.etag) } })
    t.equal(otherField.statusCode, 200)
    const ghost = await app.inject('/user/ghost-4?query=name')
    t.equal(ghost.statusCode, 404)
    t.equal(ghost.json().code, 'PROFILE_NOT_FOUND')
  })

  t.test(`${store}: a timeline has its own entry and its own TTL`, async (t) => {
    const { app, sim, clock } = await cacheStack(t, { env })
    await app.inject('/profile/frank')
    const timeline = await app.inject('/profile/frank/timeline')
    t.equal(timeline.headers['x-cache'], 'MISS', 'a cached profile does not answer a timeline')
    t.same(timeline.json(), { posts: timelineOf('frank') })
    const maxAge = Number(/max-age=(\d+)/.exec(String(timeline.headers['cache-control']))?.[1])
    t.ok(maxAge >= 54 && maxAge <= 60, 'TIMELINE_TTL_SECONDS')
    t.equal(sim.callsFor('timeline', 'frank'), 1)

    clock.advance(61_000)
    t.equal((await app.inject('/profile/frank/timeline')).headers['x-cache'], 'STALE', 'the timeline is stale after 60 s')
    t.equal((await app.inject('/profile/frank')).headers['x-cache'], 'HIT', 'while the profile is still fresh')
  })
}
