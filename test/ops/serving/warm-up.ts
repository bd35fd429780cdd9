import t from 'tap'
import type { FastifyBaseLogger } from 'fastify'
import { warmUp } from '../../../src/warm-up.ts'
import { simulator, testConfig } from '../../helper.ts'

t.test('a warm-up that cannot start is skipped with a warning, and start-up goes on', async (t) => {
  const sim = await simulator(t)
  const warnings: Array<{ fields: unknown, message: string }> = []
  const log = { info: () => {}, warn: (fields: unknown, message: string) => { warnings.push({ fields, message }) } } as unknown as FastifyBaseLogger
  // A socket path in a directory that does not exist: the stand-in upstream cannot listen.
  await warmUp(testConfig(t, sim), log, '/nonexistent-directory/warm-up.sock')
  t.equal(warnings.length, 1)
  t.match(warnings[0], { fields: { err: { syscall: 'listen' } }, message: /^warm-up skipped/ })
  t.same({ tokens: sim.stats.tokenRequests, calls: sim.stats.dataCalls }, { tokens: 0, calls: 0 })
})
