import t from 'tap'
import { MIN_CACHE_MEMORY_MB } from '../../../src/config.ts'
import { MAX_UPSTREAM_BODY_BYTES } from '../../../src/resources.ts'
import { cacheStack } from '../../helper.ts'
import { metric, parseMetrics } from '../../helpers/prometheus.ts'

const MIB = 1024 * 1024
/** Each field and post padded so that a few hundred usernames fill the least store (thousands took 13 s). */
const PADDING = 'x'.repeat(250)
/** Usernames whose profile and timeline fit a MiB as the store counts them: padded, the largest pair counts under 18 KB. */
const USERNAMES_PER_MIB = 50

for (const megabytes of [MIN_CACHE_MEMORY_MB]) {
  t.test(`CACHE_MEMORY_MB=${megabytes}, no Redis: what fits is answered from the cache; past it, fresh evictions are counted and the bound holds`, async (t) => {
    const { app, sim } = await cacheStack(t, { env: { REDIS_URL: '', CACHE_MEMORY_MB: String(megabytes), RATE_LIMIT_PER_MINUTE: '0' }, sim: { mark: () => PADDING } })
    const store = async (): Promise<Record<string, number | undefined>> => {
      const samples = parseMetrics((await app.inject('/metrics')).body)
      const read = (name: string): number | undefined => metric(samples, `pbff_memory_store_${name}`)
      return { entries: read('entries'), bytes: read('bytes'), max: read('max_bytes'), fresh: read('fresh_evictions_total') }
    }
    /** Each username's profile and timeline, in turn: the answers' statuses and X-Cache, counted. */
    const askAll = async (usernames: number, from = 0): Promise<Record<string, number>> => {
      const seen: Record<string, number> = {}
      for (let n = from; n < from + usernames; n++) {
        for (const path of [`/profile/member-${n}`, `/profile/member-${n}/timeline`]) {
          const res = await app.inject(path)
          const answer = `${res.statusCode} ${String(res.headers['x-cache'])}`
          seen[answer] = (seen[answer] ?? 0) + 1
        }
      }
      return seen
    }
    const within = USERNAMES_PER_MIB * megabytes
    t.same(await askAll(within), { '200 MISS': 2 * within })
    const calls = sim.stats.dataCalls
    t.equal(calls, 2 * within, 'each entry loaded once')
    t.same(await askAll(within), { '200 HIT': 2 * within }, 'all answered from the cache')
    t.equal(sim.stats.dataCalls, calls, 'without another upstream call')
    const held = await store()
    t.match(held, { entries: 2 * within, max: megabytes * MIB, fresh: 0 })
    t.ok((held.bytes ?? Infinity) <= megabytes * MIB, `${held.bytes} bytes held`)

    t.same(await askAll(within, within), { '200 MISS': 2 * within })
    const past = await store()
    t.ok((past.bytes ?? Infinity) <= megabytes * MIB, `past it, still within: ${past.bytes} bytes`)
    t.ok((past.fresh ?? 0) > 0, `${past.fresh} fresh entries pushed out, counted`)
    t.ok((past.entries ?? 0) < 4 * within, `${past.entries} entries held`)
  })
}

t.test('at the least CACHE_MEMORY_MB, the largest body the upstream may send is stored: one call, then hits', async (t) => {
  const { app, sim } = await cacheStack(t, { env: { REDIS_URL: '', CACHE_MEMORY_MB: String(MIN_CACHE_MEMORY_MB), RATE_LIMIT_PER_MINUTE: '0' } })
  // The entry that counts the most: every byte of the body read as U+FFFD (an invalid byte), 2 bytes held and 3 encoded.
  const open = Buffer.from('{"posts":["')
  const close = Buffer.from('"]}')
  const body = Buffer.concat([open, Buffer.alloc(MAX_UPSTREAM_BODY_BYTES - open.length - close.length, 0xff), close])
  sim.failAlways({ kind: 'raw', body })
  const answers = []
  for (let i = 0; i < 3; i++) answers.push(await app.inject({ url: '/profile/big/timeline', headers: { 'accept-encoding': 'br' } }))
  t.same(answers.map((res) => `${res.statusCode} ${String(res.headers['x-cache'])}`), ['200 MISS', '200 HIT', '200 HIT'])
  t.equal(sim.callsFor('timeline', 'big'), 1, 'one upstream call')
  const samples = parseMetrics((await app.inject('/metrics')).body)
  t.equal(metric(samples, 'pbff_memory_store_entries'), 1)
  t.equal(metric(samples, 'pbff_memory_store_fresh_evictions_total'), 0)
})
