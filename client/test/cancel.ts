import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as delay } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { createClient, ProfileBffError } from '../src/index.ts'

const PATIENCE_MS = 2000

/** A service that takes requests and never answers (a stalled instance, a hung proxy); `arrived(n)` once it holds n of them. */
async function hungService (t: Test): Promise<{ url: string, arrived: (count: number) => Promise<void> }> {
  let held = 0
  const waiting: Array<{ count: number, resolve: () => void }> = []
  const server = createServer(() => {
    held++
    for (const wait of waiting.filter(({ count }) => count <= held)) wait.resolve()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.closeAllConnections(); server.close() })
  const arrived = async (count: number): Promise<void> => { if (held < count) await new Promise<void>((resolve) => waiting.push({ count, resolve })) }
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, arrived }
}

/** What a call settles to within PATIENCE_MS: the error it rejects with, or 'still pending'. */
async function outcome (call: Promise<unknown>): Promise<unknown> {
  return await Promise.race([call.then(() => 'answered', (error: unknown) => error), delay(PATIENCE_MS, 'still pending')])
}

t.test('timeoutMs bounds every call with a TimeoutError, not a NETWORK_ERROR', async (t) => {
  const client = createClient({ baseUrl: (await hungService(t)).url, timeoutMs: 100 })
  for (const call of [client.profile('alice'), client.profiles(['alice', 'bob'])]) {
    const error = await outcome(call)
    t.ok(error instanceof DOMException && error.name === 'TimeoutError', `rejected with ${String(error)}`)
    t.notOk(error instanceof ProfileBffError)
  }
})

t.test('a caller\'s signal cancels the call; the call rejects with the signal\'s reason', async (t) => {
  const service = await hungService(t)
  const client = createClient({ baseUrl: service.url, timeoutMs: 60_000 })
  const controller = new AbortController()
  const calls = [
    client.profile('alice', { signal: controller.signal }),
    client.timeline('alice', { signal: controller.signal }),
    client.field('alice', 'name', { signal: controller.signal }),
    client.profiles(['alice'], { fields: ['name'], signal: controller.signal })
  ]
  // Cancelled once all four wait at the service, not after a time a busy machine may outlast before sending them.
  await service.arrived(calls.length)
  controller.abort()
  for (const call of calls) {
    const error = await outcome(call)
    t.ok(error instanceof DOMException && error.name === 'AbortError', `rejected with ${String(error)}`)
  }
  const reason = new Error('the page was left')
  t.equal(await outcome(client.profile('bob', { signal: AbortSignal.abort(reason) })), reason)
})
