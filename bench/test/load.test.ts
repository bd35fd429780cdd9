import { spawnSync } from 'node:child_process'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { compareAnswers, parseHead, type RawResponse } from '../floor-check.ts'
import { assertWrkInstalled, parseWrkOutput, roundFigures, runRound, wrkDelayMs } from '../load.ts'
import { countedBetween, parseCacheResults, sampleValues } from '../metrics.ts'
import { busyMsOfProcStat, statCpuMs } from '../processes.ts'
import { phaseSetting, PHASES } from '../settings.ts'

const WRK_LINE = 'PBFF_WRK {"requests":250000,"durationUs":5000000,"bytes":300000000,"errors":{"connect":0,"read":1,"write":0,"status":7,"timeout":2},' +
  '"latencyUs":{"p50":880,"p90":1150,"p99":1840,"p999":4000,"max":9000,"mean":950.5},"cpuTicks":310}'

t.test('wrk\'s summary line is found among its output and turned into a round\'s figures', async (t) => {
  const summary = parseWrkOutput(`Running 5s test @ http://127.0.0.1:1\n  1 threads and 50 connections\nRequests/sec:  50000.00\n${WRK_LINE}\n`)
  t.same(roundFigures(summary), {
    requestsPerSecond: 50_000,
    p50Ms: 0.88,
    p99Ms: 1.84,
    responses: 250_000,
    errors: 3,
    non2xx: 7,
    generatorCpu: 0.62
  }, '310 ticks of CPU over 5 s: 62% of a core')
  t.throws(() => parseWrkOutput('Requests/sec: 1\n'), /no summary line/)
  t.throws(() => parseWrkOutput('PBFF_WRK {"requests":1,"durationUs":0}'), /makes no sense/)
  t.ok(Number.isNaN(roundFigures({ ...summary, cpuTicks: -1 }).generatorCpu), 'no /proc: unknown, so the round cannot count')
})

t.test('a rate becomes a whole-millisecond pause per connection, or none', async (t) => {
  t.equal(wrkDelayMs(50, undefined), 0)
  t.equal(wrkDelayMs(50, 2_000), 25)
  t.equal(wrkDelayMs(50, 50_000), 0, 'at 1 ms the pause would cap the rate: full speed instead')
})

t.test('CPU time from a /proc stat line, whose command may hold spaces and parentheses', async (t) => {
  const fields = ['S', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '150', '50', '0']
  t.equal(statCpuMs(`123 (node (a b)) ${fields.join(' ')}`), 2_000)
  t.equal(busyMsOfProcStat('cpu  100 1 50 9000 7 2 3 4 0 0\ncpu0 50 0 25 4500 3 1 1 2 0 0\n'), (100 + 1 + 50 + 2 + 3 + 4) * 10, 'the machine\'s busy time: all but idle and iowait')
})

t.test('the service\'s own counts: answers of the profile route by status, profile lookups by state', async (t) => {
  const text = (hits: number): string => [
    '# HELP pbff_http_requests_total Requests answered',
    `pbff_http_requests_total{method="GET",route="/profile/:username",status="200"} ${hits}`,
    'pbff_http_requests_total{method="GET",route="/metrics",status="200"} 3',
    `pbff_cache_lookups_total{resource="profile",state="HIT"} ${hits}`,
    'pbff_cache_lookups_total{resource="profile",state="MISS"} 100',
    'pbff_cache_lookups_total{resource="timeline",state="HIT"} 9',
    'pbff_cache_lookups_total_other 1',
    'nodejs_heap_size_used_bytes 12345678'
  ].join('\n')
  t.same(parseCacheResults(text(500)), { statuses: { 200: 500 }, xCache: { HIT: 500, MISS: 100 } })
  t.same(countedBetween(parseCacheResults(text(500)), parseCacheResults(text(900))), { statuses: { 200: 400 }, xCache: { HIT: 400 } }, 'what did not move is left out')
  t.same(sampleValues(text(1), 'nodejs_heap_size_used_bytes'), [{ labels: {}, value: 12_345_678 }])
  t.same(sampleValues(text(1), 'pbff_cache_lookups_total').length, 3, 'a longer name is another metric')
})

t.test('phases from BENCH_PHASES: all but the opt-in ones by default, in the run\'s order, unknown ones refused', async (t) => {
  t.same(phaseSetting('X', undefined), PHASES.filter((phase) => phase !== 'soak'))
  t.same(phaseSetting('X', ' '), PHASES.filter((phase) => phase !== 'soak'))
  t.same(phaseSetting('X', 'soak,hit'), ['hit', 'soak'])
  t.same(phaseSetting('X', 'hit,zipf'), ['zipf', 'hit'])
  t.throws(() => phaseSetting('X', 'hit,hits'), /X: unknown phase hits/)
})

t.test('the floor check compares bodies byte for byte, header names, sizes and request ids', async (t) => {
  const answer = (id: string, body = '{"user":{}}', extra = ''): RawResponse => {
    const head = `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nX-Request-Id: ${id}\r\n${extra}content-length: ${body.length}\r\n\r\n`
    const { names, headers } = parseHead(head.slice(0, -4))
    return { names, headers, head: Buffer.from(head), body: Buffer.from(body) }
  }
  t.same(parseHead('HTTP/1.1 200 OK\r\nA: 1\r\nb:2'), { names: ['a', 'b'], headers: { a: '1', b: '2' } })
  const same = compareAnswers([answer('1'), answer('2')], [answer('a'), answer('b')])
  t.same(same, {
    hitHeaders: ['content-type', 'x-request-id', 'content-length'],
    floorHeaders: ['content-type', 'x-request-id', 'content-length'],
    differingValues: [],
    hitBytes: same.hitBytes,
    floorBytes: same.hitBytes,
    bodyBytes: 11,
    sameBody: true,
    freshRequestIds: true
  })
  t.equal(compareAnswers([answer('1'), answer('2')], [answer('a', '{"user":[]}'), answer('b')]).sameBody, false, 'same length, other bytes')
  t.equal(compareAnswers([answer('1'), answer('1')], [answer('a'), answer('b')]).freshRequestIds, false)
  t.same(compareAnswers([answer('1', '{}', 'x-cache: HIT\r\n'), answer('2')], [answer('a', '{}'), answer('b')]).hitHeaders, ['content-type', 'x-request-id', 'x-cache', 'content-length'])
  t.same(compareAnswers([answer('1', '{}', 'x-cache: HIT\r\n'), answer('2')], [answer('a', '{}', 'x-cache: MISS\r\n'), answer('b')]).differingValues, ['x-cache: HIT / MISS'],
    'the request id differs by design, not reported')
})

const wrkMissing = spawnSync('wrk', ['--version']).error !== undefined
t.test('wrk with bench/wrk.lua cycles through the paths and reports its own CPU', { skip: wrkMissing ? 'wrk is not installed (apt-get install wrk)' : false }, async (t) => {
  const seen: Record<string, number> = {}
  const server = createServer((request, response) => {
    seen[request.url ?? ''] = (seen[request.url ?? ''] ?? 0) + 1
    response.end(request.url === '/c' ? 'no' : 'ok')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.close() })
  const { port } = server.address() as AddressInfo
  const round = await runRound({ url: `http://127.0.0.1:${port}` }, ['/a', '/b', '/c'], { connections: 3, seconds: 1, rate: 300 })
  const counts = ['/a', '/b', '/c'].map((path) => seen[path] ?? 0)
  t.ok(counts.every((n) => n > 20), `each path requested: ${counts.join(', ')}`)
  t.ok(Math.max(...counts) - Math.min(...counts) <= 3, 'in turn')
  t.ok(round.responses > 60 && round.responses < 600, `about 300 a second with a pause: ${round.responses}`)
  t.ok(round.generatorCpu >= 0 && round.generatorCpu < 0.5, `wrk's CPU read: ${round.generatorCpu}`)
  t.ok(Number.isNaN(round.serverCpuUs), 'no server pid given: no server CPU')
  t.equal(round.served, undefined)
})

t.test('a missing wrk fails with how to install it', async (t) => {
  t.throws(() => { assertWrkInstalled('/nonexistent/wrk') }, /apt-get install wrk/)
})
