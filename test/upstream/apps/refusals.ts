import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { EXCHANGE_DEADLINE_MS } from '../../../src/upstream/token-timing.ts'
import {
  anotherApp, capturedLogger, Clock, eventually, HostClock, metric, parseMetrics, rawRedis, REDIS_URL, stack, tally, tokenKeyOf, untilRedisReady, type LogLine
} from '../../helper.ts'

// Callers refused at once (no token, a back-off, a budget spent): counted, summed up in the log, never a line each.
const NO_RATE_LIMIT = { RATE_LIMIT_PER_MINUTE: '0' }
const WARN = 40

async function refusalsCounted (app: FastifyInstance, reason: string): Promise<number | undefined> {
  return metric(parseMetrics((await app.inject('/metrics')).body), 'pbff_refusals_total', { reason })
}

const summaries = (lines: LogLine[]): Array<Record<string, number>> =>
  lines.filter((line) => line.level === WARN && 'refusals' in line).map((line) => line.refusals as Record<string, number>)

t.test('refusals are counted by reason and summed up in one warn line a second of clock at most, never a line each', async (t) => {
  const clock = new Clock()
  const { logger, lines } = capturedLogger()
  const { app, sim } = await stack(t, { env: NO_RATE_LIMIT, now: clock.now, logger })
  sim.failNext({ kind: 'status', status: 429, retryAfter: '300' })
  t.equal((await app.inject('/profile/first')).statusCode, 503, 'the upstream asks for a pause')
  const answers = []
  // 350 cold usernames over 3.5 s of the clock, inside the 300 s window.
  for (let i = 0; i < 350; i++) {
    answers.push(await app.inject(`/profile/cold-${i}`))
    clock.advance(10)
  }
  t.same(tally(answers), { '503 UPSTREAM_RATE_LIMITED': 350 })
  t.equal(sim.stats.dataCalls, 1, 'none reached the upstream')
  t.equal(await refusalsCounted(app, 'backoff'), 350)
  t.equal(await refusalsCounted(app, 'no-token'), 0)
  const written = summaries(lines)
  t.ok(written.length >= 3 && written.length <= 4, `${written.length} summary lines over 3.5 s of the clock`)
  const perRefusal = lines.filter((line) => line.level === WARN && /slow down/.test(line.msg))
  t.equal(perRefusal.length, 1, 'a warn line for the call the upstream refused only, none for the refusals')
  t.equal(lines.filter((line) => line.msg === 'request errored' || line.msg === 'request completed').length, 351 + 2, 'the access lines stay')
  await app.close()
  t.equal(summaries(lines).reduce((sum, counts) => sum + (counts.backoff ?? 0), 0), 350, 'every refusal summed up, the last ones at close')
})

t.test('a hung identity provider and two instances on one Redis: after the first failure both refuse at once; a 200 within 3 s of its return', async (t) => {
  // A clock that runs, moved past the exchange's deadline: the shared failure window lives in Redis's own time.
  const clock = new HostClock()
  const { app, sim, config } = await stack(t, { env: { ...NO_RATE_LIMIT, REDIS_URL }, now: clock.now })
  const other = await anotherApp(t, config, clock.now)
  await Promise.all([untilRedisReady(app), untilRedisReady(other)])
  sim.failTokenNext({ kind: 'hang' })
  const first = app.inject('/profile/first')
  await eventually(() => sim.stats.tokenRequests === 1, 'the exchange reached the provider')
  // The provider answers again from here on: only that exchange hangs.
  clock.advance(EXCHANGE_DEADLINE_MS)
  const failedAt = clock.now()
  t.match((await app.inject('/profile/a-0')).json(), { code: 'UPSTREAM_AUTH_FAILED', message: /failing/ }, 'the exchange failed at its deadline')
  t.match((await first).json(), { code: 'UPSTREAM_AUTH_FAILED', message: /did not answer within/ })
  const redis = rawRedis(t)
  await eventually(async () => await redis.pttl(`${tokenKeyOf(config)}:failing`) > 0, 'the failure is shared')
  // Inside the first back-off (at least 1 s).
  const answers = []
  for (let i = 1; i <= 10; i++) answers.push(await app.inject(`/profile/a-${i}`), await other.inject(`/profile/b-${i}`))
  t.same(tally(answers), { '502 UPSTREAM_AUTH_FAILED': 20 })
  t.ok(answers.every((answer) => /failing/.test(answer.json<{ message: string }>().message)), 'refused, none held for an exchange')
  t.equal(sim.stats.tokenRequests, 1, '20 answered, no exchange of their own')
  t.equal(await refusalsCounted(app, 'no-token'), 11)
  t.equal(await refusalsCounted(other, 'no-token'), 10)

  let step = 0
  await eventually(async () => {
    step++
    const answered = [await app.inject(`/profile/later-a-${step}`), await other.inject(`/profile/later-b-${step}`)]
    return answered.some((answer) => answer.statusCode === 200)
  }, 'a 200 once the back-off is over', 5_000)
  const recoveredMs = clock.now() - failedAt
  t.ok(recoveredMs <= 3_000, `the first 200 ${recoveredMs} ms after the failure`)
  t.ok(sim.stats.tokenRequests <= 3, `${sim.stats.tokenRequests} exchanges in all`)
})
