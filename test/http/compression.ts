import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import Fastify from 'fastify'
import t from 'tap'
import { EncodedBodies, MIN_ENCODED_BYTES, preferredCoding } from '../../src/http/encoded-bodies.ts'
import { sendRepresentation } from '../../src/http/serve.ts'
import { cacheStack, stack } from '../helper.ts'

const members = Array.from({ length: 30 }, (_, i) => `c-${i}`)
const batchUrl = `/profiles?${members.map((username) => `username=${username}`).join('&')}`

t.test('a large body goes out in the caller\'s coding, decoding to exactly the identity body, each coding with its own ETag', async (t) => {
  const { app } = await cacheStack(t)
  const identity = await app.inject(batchUrl)
  t.ok(identity.rawPayload.length >= MIN_ENCODED_BYTES, 'a body above the threshold')
  t.equal(identity.headers['content-encoding'], undefined)
  t.equal(identity.headers.vary, 'accept-encoding')
  const decode = { br: brotliDecompressSync, gzip: gunzipSync }
  const etags = new Set([identity.headers.etag])
  for (const [accept, coding] of [['gzip, deflate, br', 'br'], ['gzip', 'gzip'], ['br;q=0, *', 'gzip'], ['*', 'br']] as const) {
    const res = await app.inject({ url: batchUrl, headers: { 'accept-encoding': accept } })
    t.equal(res.headers['content-encoding'], coding, accept)
    t.equal(res.headers.vary, 'accept-encoding')
    t.ok(res.rawPayload.length < identity.rawPayload.length / 2, `${coding} is smaller`)
    t.same(decode[coding](res.rawPayload), identity.rawPayload, `${coding} decodes to the identity body`)
    etags.add(res.headers.etag)
    const revalidated = await app.inject({ url: batchUrl, headers: { 'accept-encoding': accept, 'if-none-match': String(res.headers.etag) } })
    t.equal(revalidated.statusCode, 304, `${accept}: its own tag revalidates`)
  }
  t.equal(etags.size, 3, 'identity, br and gzip: three tags')
  const identityTagForBrotli = await app.inject({ url: batchUrl, headers: { 'accept-encoding': 'br', 'if-none-match': String(identity.headers.etag) } })
  t.equal(identityTagForBrotli.statusCode, 200, 'the identity tag does not name the brotli bytes')
})

t.test('the docs and /metrics are compressed too: the docs with a tag per coding that revalidates, /metrics fresh each scrape', async (t) => {
  const { app } = await stack(t)
  const decode = { br: brotliDecompressSync, gzip: gunzipSync }
  for (const url of ['/docs/json', '/docs/yaml']) {
    const identity = await app.inject(url)
    t.ok(identity.rawPayload.length >= MIN_ENCODED_BYTES, `${url}: a body above the threshold`)
    t.equal(identity.headers.vary, 'accept-encoding', url)
    for (const coding of ['br', 'gzip'] as const) {
      const res = await app.inject({ url, headers: { 'accept-encoding': coding } })
      t.equal(res.headers['content-encoding'], coding, `${url} ${coding}`)
      t.same(decode[coding](res.rawPayload), identity.rawPayload, `${url}: ${coding} decodes to the identity body`)
      t.not(res.headers.etag, identity.headers.etag, `${url}: ${coding} has its own tag`)
      const revalidated = await app.inject({ url, headers: { 'accept-encoding': coding, 'if-none-match': String(res.headers.etag) } })
      t.equal(revalidated.statusCode, 304, `${url}: ${coding}'s tag revalidates`)
      t.equal(revalidated.headers['content-encoding'], undefined)
    }
  }
  const metrics = await app.inject({ url: '/metrics', headers: { 'accept-encoding': 'gzip' } })
  t.equal(metrics.headers['content-encoding'], 'gzip')
  t.equal(metrics.headers.vary, 'accept-encoding')
  t.match(gunzipSync(metrics.rawPayload).toString(), /^# HELP /m)
  t.equal((await app.inject('/metrics')).headers['content-encoding'], undefined, 'as it is to a scraper that accepts no coding')
})

t.test('a body below the threshold (a profile) is sent as it is, without Vary', async (t) => {
  const { app } = await cacheStack(t)
  const profile = await app.inject({ url: '/profile/alice', headers: { 'accept-encoding': 'br, gzip' } })
  t.ok(profile.rawPayload.length < MIN_ENCODED_BYTES)
  t.equal(profile.headers['content-encoding'], undefined)
  t.equal(profile.headers.vary, undefined)
})

t.test('each version is compressed once: hits send the stored bytes', async (t) => {
  const compressed: string[] = []
  const counting = async (body: string): Promise<Buffer> => {
    compressed.push(body)
    return Buffer.from(body.slice(0, 10))
  }
  const encodings = new EncodedBodies({ compress: { br: counting, gzip: counting } })
  const body = 'x'.repeat(MIN_ENCODED_BYTES)
  const answers = await Promise.all(Array.from({ length: 5 }, async () => await encodings.get('"v1"', body)))
  await encodings.get('"v1"', body)
  t.equal(compressed.length, 2, 'one brotli and one gzip for five concurrent and one later request')
  t.equal(new Set(answers).size, 1)
  await encodings.get('"v2"', `${body}y`)
  t.equal(compressed.length, 4, 'a new version is compressed once more')
  t.equal(await encodings.get('"small"', 'x'.repeat(MIN_ENCODED_BYTES - 1)), undefined, 'below the threshold: never')
  t.equal(compressed.length, 4)
})

t.test('a caller that takes no coding is answered at once, without waiting for encodings (nor making them)', { timeout: 10_000 }, async (t) => {
  let asked = 0
  // Compressors that never finish: an answer that waited for them would never come.
  const never = async (): Promise<Buffer> => { asked++; return await new Promise<Buffer>(() => {}) }
  const encodings = new EncodedBodies({ compress: { br: never, gzip: never } })
  const body = JSON.stringify({ posts: ['x'.repeat(MIN_ENCODED_BYTES)] })
  const app = Fastify()
  t.teardown(async () => { await app.close() })
  app.get('/large', async (_request, reply) => { await sendRepresentation(reply, { body, etag: '"v1"' }, encodings); return await reply })
  for (const accept of [undefined, 'identity', 'br;q=0, gzip;q=0']) {
    const res = await app.inject({ url: '/large', headers: accept === undefined ? {} : { 'accept-encoding': accept } })
    t.equal(res.body, body, `Accept-Encoding: ${String(accept)}`)
    t.same([res.headers['content-encoding'], res.headers.vary, res.headers.etag], [undefined, 'accept-encoding', '"v1"'])
  }
  t.equal(asked, 0, 'nothing compressed for callers that take no coding')
})

t.test('what is kept holds its own bytes only, as its bound counts them: not the compressor\'s whole output chunk', async (t) => {
  const encodings = new EncodedBodies()
  for (let i = 0; i < 20; i++) {
    const body = JSON.stringify({ posts: Array.from({ length: 150 }, (_, post) => `post ${i}-${post}`) })
    const kept = await encodings.get(`"v${i}"`, body)
    if (kept === undefined) throw new Error('a body worth encoding')
    for (const coding of ['br', 'gzip'] as const) t.equal(kept[coding].buffer.byteLength, kept[coding].length, `${i} ${coding}`)
  }
})

t.test('a compression that fails leaves the body as it is', async (t) => {
  let attempts = 0
  const failing = async (): Promise<Buffer> => {
    attempts++
    throw new Error('no memory for a compressor')
  }
  const encodings = new EncodedBodies({ compress: { br: failing, gzip: failing } })
  t.equal(await encodings.get('"v1"', 'x'.repeat(MIN_ENCODED_BYTES)), undefined)
  t.equal(await encodings.get('"v1"', 'x'.repeat(MIN_ENCODED_BYTES)), undefined)
  t.ok(attempts >= 2, 'not remembered: tried again')
})

t.test('Accept-Encoding is read with its weights', async (t) => {
  const cases: Array<[string | undefined, string | undefined]> = [
    [undefined, undefined], ['', undefined], ['identity', undefined], ['gzip', 'gzip'], ['br', 'br'], ['gzip;q=1, br;q=0.5', 'gzip'],
    ['gzip, br', 'br'], ['*;q=0', undefined], ['br;q=0, gzip;q=0', undefined], ['deflate', undefined], ['BR', 'br'],
    // identity weighed above the codings wins; named below them, or not named, it does not.
    ['identity;q=1, gzip;q=0.1', undefined], ['identity, br;q=0.9', undefined], ['*;q=0.5, identity;q=0.6, gzip;q=0.55', undefined],
    ['identity;q=0.5, gzip', 'gzip'], ['gzip;q=0.1', 'gzip'], ['*;q=0.5', 'br'], ['identity;q=0, gzip;q=0.1', 'gzip']
  ]
  for (const [header, coding] of cases) t.equal(preferredCoding(header), coding, String(header))
})

t.test('Server-Timing says how the answer was made, and browsers may read it', async (t) => {
  const { app } = await cacheStack(t, { sim: { latencyMs: 50 } })
  const miss = await app.inject({ url: '/profile/timed', headers: { origin: 'https://app.example' } })
  const [, dur] = /^cache;desc=MISS, upstream;dur=(\d+\.\d)$/.exec(String(miss.headers['server-timing'])) ?? []
  t.ok(Number(dur) >= 50, `the upstream's share (${dur} ms) includes its latency`)
  t.match(miss.headers['access-control-expose-headers'], /server-timing/)
  const hit = await app.inject('/user/timed?query=name')
  t.equal(hit.headers['server-timing'], 'cache;desc=HIT', 'no upstream share when none was waited for')
  const notModified = await app.inject({ url: '/profile/timed', headers: { 'if-none-match': String(miss.headers.etag) } })
  t.equal(notModified.headers['server-timing'], 'cache;desc=HIT')
})

t.test('an error after a load says MISS, and how long it waited for the upstream', async (t) => {
  const { app, sim } = await cacheStack(t, { sim: { latencyMs: 50 } })
  sim.failAlways({ kind: 'status', status: 500 })
  for (const url of ['/profile/fails', '/profile/fails/timeline', '/user/fails?query=name']) {
    const failed = await app.inject(url)
    t.equal(failed.statusCode, 502, url)
    t.equal(failed.headers['x-cache'], 'MISS', `${url}: nothing cached to serve`)
    const [, dur] = /^cache;desc=MISS, upstream;dur=(\d+\.\d)$/.exec(String(failed.headers['server-timing'])) ?? []
    t.ok(Number(dur) >= 50, `${url}: the upstream's share (${dur} ms) includes its latency`)
    t.equal(failed.headers['cache-control'], 'no-store')
  }
})
