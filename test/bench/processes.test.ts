import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { freePort, ProcessGroup } from '../../bench/processes.js'
import { socketBurst } from '../../bench/socket-burst.js'

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
    env: (port) => ({ ...process.env, PORT: String(port), BARE_BODY: '{"user":{}}', BARE_DELAY_MS: '20' }) as Record<string, string>
  })
  const { port } = bare
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
    env: () => ({})
  }), /broken did not start: the process exited\n[^]*configuration error: PORT/)
})

t.test('the burst client counts a refused connection as a failure to open, not as an answer', async (t) => {
  await t.rejects(socketBurst([await freePort()], '/', 1), /could not open 1 connections/)
})

t.test('a port taken between the check and the bind is retried on another port, a bounded number of times', async (t) => {
  const logDir = mkdtempSync(join(tmpdir(), 'pbff-bench-test-'))
  const group = new ProcessGroup({ root, logDir })
  t.teardown(async () => {
    await group.stopAll()
    rmSync(logDir, { recursive: true, force: true })
  })
  // Fails like a taken port until its flag file exists (it creates it on the first try), then listens.
  const flakyServer = `
    const fs = require('node:fs')
    if (!fs.existsSync(process.env.FLAG)) {
      fs.writeFileSync(process.env.FLAG, '')
      process.stderr.write('Error: listen EADDRINUSE: address already in use')
      process.exit(1)
    }
    require('node:http').createServer((request, response) => response.end('ok')).listen(Number(process.env.PORT), '127.0.0.1')`
  const flag = join(logDir, 'flag')
  const child = await group.start({ name: 'flaky', args: ['-e', flakyServer], readyPath: '/', env: (port) => ({ PORT: String(port), FLAG: flag }) })
  t.ok(child.port > 0, 'started on the second attempt')

  const alwaysTaken = 'process.stderr.write("Error: listen EADDRINUSE"); process.exit(1)'
  await t.rejects(group.start({ name: 'taken', args: ['-e', alwaysTaken], readyPath: '/', env: () => ({}) }), /taken did not start: the free port it was given was taken 3 times/)
})
