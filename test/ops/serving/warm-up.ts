import t from 'tap'
import { warmUp } from '../../../src/warm-up.ts'
import { simulator, testConfig } from '../../helper.ts'

t.test('a warm-up whose stand-in upstream cannot listen stops with the reason, and sends nothing', async (t) => {
  const sim = await simulator(t)
  // A socket path in a directory that does not exist.
  const warmed = await warmUp(testConfig(t, sim), '/nonexistent-directory/warm-up.sock')
  t.match(warmed, { error: { syscall: 'listen' } })
  t.same({ tokens: sim.stats.tokenRequests, calls: sim.stats.dataCalls }, { tokens: 0, calls: 0 })
})

t.test('a warm-up is answered 200 MISS, then 200 HIT, by its own stand-in: it reports its time, and the real upstream sees nothing', async (t) => {
  const sim = await simulator(t)
  // Any other answer (a stand-in the throwaway app did not reach, say) would stop it with the reason instead.
  const warmed = await warmUp(testConfig(t, sim))
  t.match(warmed, { ms: Number })
  t.same({ tokens: sim.stats.tokenRequests, calls: sim.stats.dataCalls }, { tokens: 0, calls: 0 })
})

t.test('a warm-up past its limit stops with a deadline, its throwaway app closed with its requests under way', async (t) => {
  const sim = await simulator(t)
  const warmed = await warmUp(testConfig(t, sim), undefined, 1)
  t.match(warmed, { error: { name: 'TimeoutError' } })
  t.same({ tokens: sim.stats.tokenRequests, calls: sim.stats.dataCalls }, { tokens: 0, calls: 0 })
})
