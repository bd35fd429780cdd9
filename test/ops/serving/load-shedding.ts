import type { FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import type { Simulator } from '../../../dev/simulator.ts'
import { buildApp } from '../../../src/app.ts'
import { SHED_RETRY_AFTER_SECONDS } from '../../../src/plugins/load-shedding.ts'
import { eventually, simulator, stack, testConfig } from '../../helper.ts'

/** The whole service with a heap limit every process exceeds: deterministic pressure, no busy loop. */
async function pressedApp (t: Test, levels: number[] = []): Promise<{ app: FastifyInstance, sim: Simulator }> {
  const sim = await simulator(t)
  const stream = { write: (line: string) => { levels.push((JSON.parse(line) as { level: number }).level) } }
  const app = await buildApp({
    config: testConfig(t, sim),
    logger: { level: 'warn', stream },
    loadShedding: { maxHeapUsedBytes: 1, sampleInterval: 10 }
  })
  t.teardown(() => app.close())
  // The first sample is taken one interval after start: wait for it, boundedly.
  await eventually(() => app.isUnderPressure(), 'under pressure')
  return { app, sim }
}

t.test('under pressure, requests are refused at once with 503 SERVICE_OVERLOADED and Retry-After', async (t) => {
  const levels: number[] = []
  const { app, sim } = await pressedApp(t, levels)
  for (const url of ['/profile/alice', '/user/alice?query=name', '/readyz']) {
    const res = await app.inject(url)
    t.equal(res.statusCode, 503, url)
    t.equal(res.headers['retry-after'], String(SHED_RETRY_AFTER_SECONDS), url)
    t.equal(res.headers['cache-control'], 'no-store', url)
    t.same(res.json(), {
      statusCode: 503,
      code: 'SERVICE_OVERLOADED',
      error: 'Service Unavailable',
      message: `The service is under too much load: retry in ${SHED_RETRY_AFTER_SECONDS} s`
    }, url)
  }
  t.equal(sim.stats.dataCalls + sim.stats.tokenRequests, 0, 'nothing reached the upstream')
  t.same(levels, [40, 40, 40], 'each refusal is a warn, not an error: shedding is expected under load')
})

t.test('under pressure, liveness and metrics still answer', async (t) => {
  const { app } = await pressedApp(t)
  const live = await app.inject('/healthz')
  t.equal(live.statusCode, 200)
  t.same(live.json(), { status: 'ok' })
  const metrics = await app.inject('/metrics')
  t.equal(metrics.statusCode, 200)
  t.match(metrics.body, /pbff_http_requests_total\{method="GET",route="\/healthz",status="200"\} 1/)
})

t.test('the service sheds load with production thresholds, and is not under pressure at rest', async (t) => {
  const { app } = await stack(t, { loadShedding: {} })
  t.equal(typeof app.isUnderPressure, 'function', 'load shedding is installed')
  // At rest: a stall of this test process (a busy machine) may set it off for a sample.
  await eventually(() => !app.isUnderPressure(), 'at rest')
  t.equal((await app.inject('/profile/alice')).statusCode, 200)
})
