import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { createServer as createHttpServer } from 'node:http'
import { createServer, type AddressInfo } from 'node:net'
import { ProcessGroup } from '../processes.ts'
import { socketBurst } from '../socket-burst.ts'
import { checkFloor } from '../floor-check.ts'
import { startBare } from '../targets.ts'

const root = fileURLToPath(new URL('../..', import.meta.url))

function isRunning (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

t.test('a started child answers, is timed by the burst client, and is gone after stopAll', async (t) => {
  const logDir = mkdtempSync(join(tmpdir(), 'pbff-bench-test-'))
  const group = new ProcessGroup({ root, logDir })
  t.teardown(async () => {
    await group.stopAll()
    rmSync(logDir, { recursive: true, force: true })
  })
  const bare = await group.start({
    name: 'bare',
    args: ['--import', 'tsx', 'bench/bare-server.ts'],
    readyPath: '/healthz',
    env: { ...process.env, PORT: '0', BARE_BODY: '{"user":{}}', BARE_DELAY_MS: '20' } as Record<string, string>
  })
  const { port } = bare
  t.ok(port > 0, 'listened on port 0 and reported the port it got')
  t.equal(bare.url, `http://127.0.0.1:${port}`)
  t.ok((bare.rss() ?? 0) > 1024 * 1024, 'RSS read from /proc')

  const answers = await socketBurst([port], '/slow/profile/anyone', 20)
  t.equal(answers.length, 20)
  t.ok(answers.every((answer) => answer.status === 200 && answer.xCache === undefined))
  t.ok(answers.every((answer) => answer.ms >= 19), 'each waited for the delay')
  const missing = await socketBurst([port], '/nowhere', 2)
  t.same(missing.map((answer) => answer.status), [404, 404])

  await group.stopAll()
  t.notOk(isRunning(bare.pid), 'stopped')
})

t.test('a child that dies at start-up fails start() with its stderr, and leaves nothing running', async (t) => {
  const logDir = mkdtempSync(join(tmpdir(), 'pbff-bench-test-'))
  const group = new ProcessGroup({ root, logDir })
  t.teardown(() => rmSync(logDir, { recursive: true, force: true }))
  await t.rejects(group.start({
    name: 'broken',
    args: ['-e', 'process.stderr.write("configuration error: PORT"); process.exit(1)'],
    readyPath: '/healthz',
    env: {}
  }), /broken did not start: the process exited\n[^]*configuration error: PORT/)
})

t.test('the burst client counts a refused connection as a failure to open, not as an answer', async (t) => {
  // A port the kernel just handed out and took back: nothing listens there.
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  await t.rejects(socketBurst([port], '/', 1), /could not open 1 connections/)
})

t.test('a burst from several clients names each in X-Forwarded-For, round-robin; from one, it names none', async (t) => {
  const forwarded: Array<string | undefined> = []
  const server = createHttpServer((request, response) => {
    forwarded.push(request.headers['x-forwarded-for'] as string | undefined)
    response.end('ok')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.close() })
  const { port } = server.address() as AddressInfo
  const answers = await socketBurst([port], '/', 6, 3)
  t.same(answers.map((answer) => answer.status), [200, 200, 200, 200, 200, 200])
  t.same([...forwarded].sort(), ['10.0.0.0', '10.0.0.0', '10.0.0.1', '10.0.0.1', '10.0.0.2', '10.0.0.2'], 'three clients, two requests each')
  forwarded.length = 0
  await socketBurst([port], '/', 2)
  t.same(forwarded, [undefined, undefined], 'no header: the connection\'s own address')
})

t.test('a child that never reports a port fails start() once it exits', async (t) => {
  const logDir = mkdtempSync(join(tmpdir(), 'pbff-bench-test-'))
  const group = new ProcessGroup({ root, logDir })
  t.teardown(() => rmSync(logDir, { recursive: true, force: true }))
  await t.rejects(group.start({ name: 'silent', args: ['-e', 'setTimeout(() => {}, 200)'], readyPath: '/', env: {} }), /silent did not start: the process exited/)
})

t.test('the floor answers with the headers and body it was given, and a fresh request id each time', async (t) => {
  const logDir = mkdtempSync(join(tmpdir(), 'pbff-bench-test-'))
  const group = new ProcessGroup({ root, logDir })
  t.teardown(async () => {
    await group.stopAll()
    rmSync(logDir, { recursive: true, force: true })
  })
  const body = '{"user":{"username":"é"}}'
  const bare = await startBare(group, { body, headers: { 'content-type': 'application/json; charset=utf-8', 'x-cache': 'HIT', etag: '"1"' }, delayMs: 0 })
  const check = await checkFloor({ port: bare.port, path: '/floor/profile/a' }, { port: bare.port, path: '/floor/profile/b' })
  t.ok(check.sameBody)
  t.equal(check.bodyBytes, Buffer.byteLength(body), 'bytes, not characters')
  t.ok(check.freshRequestIds)
  t.same(check.floorHeaders.filter((name) => ['content-type', 'x-cache', 'etag', 'x-request-id', 'content-length'].includes(name)).sort(),
    ['content-length', 'content-type', 'etag', 'x-cache', 'x-request-id'])
})
