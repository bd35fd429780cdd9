import t from 'tap'
import { RedisClock } from '../../../src/redis/clock.ts'
import { Membership, MEMBER_LIFETIME_MS } from '../../../src/redis/membership.ts'
import type { Schedule } from '../../../src/upstream/budget/schedule.ts'
import { Clock, eventually, fakeHealth, testRedis, type TestContext } from '../../helper.ts'
import { instance, Outcomes, settingsOf, Timers } from './harness.ts'

// Audit (budget-restart-empty): Redis restarted empty, each instance's first beat counted only those that had beaten
// before it (1, 2, 3); Redis gone again before the next beat, they shared the budget by those counts (173 calls in 3 s,
// bound 100). The share while Redis is away is now the largest count of Redis's last lifetime of answers.

const RPS = 30
const BURST = 10
const BEAT_MS = MEMBER_LIFETIME_MS / 3

/** A fleet of `size` instances on the shared Redis under the test's prefix, Redis's health moved by the test. */
function fleet (t: TestContext, size: number) {
  const { redis, prefix } = testRedis(t)
  const clock = new Clock()
  const timers = new Timers(clock)
  const health = Object.assign(fakeHealth(), { listen: () => {} })
  const key = `${prefix}members`
  const alive = new Set<Membership>()
  const join = (): Membership => {
    const schedule: Schedule = (ms, run) => timers.schedule(ms, () => { if (alive.has(member)) run() })
    const member: Membership = new Membership({ redis, health, clock: new RedisClock(clock.now), key, now: clock.now, schedule, onError: () => {} })
    alive.add(member)
    member.start()
    return member
  }
  const members = Array.from({ length: size }, join)
  const settings = settingsOf(RPS, 1, BURST)
  const shared = { redis, key: `${prefix}upstream:budget`, health }
  const gates = members.map((member) => instance({ clock, timers, settings, shared, members: member }))
  /** Redis restarted empty: each instance beats as it sees it back, in turn from the `first`, so the i-th counts i. */
  const restartEmpty = async (first = 0): Promise<void> => {
    await redis.del(key)
    health.up = true
    for (const member of [...members.slice(first), ...members.slice(0, first)]) if (alive.has(member)) await member.beat()
  }
  const seen = async (count: number): Promise<void> => {
    // The beats' answers come in order on the one connection: after this one, every beat sent so far was answered.
    await redis.ping()
    await eventually(() => members.every((member) => !alive.has(member) || member.lastSeen === count), `every instance sees ${count}`)
  }
  /** Saturating callers on every live instance for 3 s from now: the upstream calls the fleet sends. */
  const sentIn3s = async (): Promise<number> => {
    const done = new AbortController()
    const calls = new Outcomes(clock)
    const from = clock.now()
    gates.forEach((gate, i) => { if (alive.has(members[i] as Membership)) calls.ask(gate, 'caller', RPS * 4, done.signal) })
    await timers.advance(3_000)
    done.abort()
    await timers.idle()
    return calls.granted.filter((grant) => grant.at < from + 3_000).length
  }
  return { clock, timers, health, members, gates, alive, restartEmpty, seen, sentIn3s }
}

t.test('Redis restarted empty and gone again: the shares stay by the fleet\'s count, whatever the moment it goes', async (t) => {
  // Within the first beat after the restart, within a member's lifetime, after it.
  for (const size of [2, 3, 5]) {
    for (const upMs of [BEAT_MS / 4, MEMBER_LIFETIME_MS * 2 / 3, MEMBER_LIFETIME_MS + BEAT_MS]) {
      const f = fleet(t, size)
      await f.timers.advance(BEAT_MS * 1.5)
      await f.seen(size)
      // Away for longer than a lifetime first: the count from before must outlast the outage itself.
      f.health.up = false
      await f.timers.advance(MEMBER_LIFETIME_MS * 5 / 3)
      await f.restartEmpty()
      await f.timers.advance(upMs)
      if (upMs > BEAT_MS) await f.seen(size)
      f.health.up = false
      const sent = await f.sentIn3s()
      const name = `${size} instances, down again ${upMs} ms after the restart`
      t.same(f.gates.map((gate) => gate.rate().instances), Array(size).fill(size), `${name}: each shares by ${size}`)
      t.ok(sent <= RPS * 3 + BURST, `${name}: ${sent} upstream calls in 3 s <= ${RPS * 3 + BURST}`)
      t.ok(sent >= RPS * 3 * 0.8, `${name}: and the budget is used (${sent} calls)`)
      f.alive.clear()
    }
  }
})

t.test('a crash loop: restarted empty again and again, each time gone within the first beat', async (t) => {
  const f = fleet(t, 3)
  await f.timers.advance(BEAT_MS * 1.5)
  await f.seen(3)
  // Each time up for a quarter of a beat between two beats, each instance first back in turn.
  for (let restart = 0; restart < 6; restart++) {
    f.health.up = false
    await f.timers.advance(BEAT_MS * 2.75)
    await f.restartEmpty(restart % 3)
    await f.timers.advance(BEAT_MS / 4)
  }
  f.health.up = false
  t.same(f.gates.map((gate) => gate.rate().instances), [3, 3, 3], 'each still shares by 3')
  f.alive.clear()
})

t.test('a fleet that really shrank is followed once Redis has answered for a lifetime without the missing', async (t) => {
  for (const across of [false, true]) {
    const f = fleet(t, 3)
    await f.timers.advance(BEAT_MS * 1.5)
    await f.seen(3)
    // One instance dies (it stops beating, never leaves): across an empty restart, or while Redis stays up.
    f.alive.delete(f.members[2] as Membership)
    if (across) {
      f.health.up = false
      await f.timers.advance(MEMBER_LIFETIME_MS)
      await f.restartEmpty()
    }
    // Counted by Redis for a lifetime after its last beat, then gone from the counts answered for a lifetime more.
    await f.timers.advance(MEMBER_LIFETIME_MS * 2 + BEAT_MS)
    await f.seen(2)
    f.health.up = false
    const name = across ? 'shrank across an empty restart' : 'shrank while Redis was up'
    t.same(f.gates.slice(0, 2).map((gate) => gate.rate().instances), [2, 2], `${name}: each shares by 2`)
    const sent = await f.sentIn3s()
    t.ok(sent >= RPS * 3 * 0.8 && sent <= RPS * 3 + BURST, `${name}: the budget used, within the bound (${sent} calls in 3 s)`)
    f.alive.clear()
  }
})
