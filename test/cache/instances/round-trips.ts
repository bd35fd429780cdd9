import type { FastifyInstance } from 'fastify'
import type { Command } from 'ioredis'
import t from 'tap'
import type { Simulator } from '../../../dev/simulator.ts'
import { READ_OR_CLAIM } from '../../../src/cache/redis-scripts.ts'
import { cacheStack, roundTripsOf } from '../../helper.ts'

t.test('a cold miss waits for two Redis round trips: the read that claims its load, and the write that tells and releases', async (t) => {
  const { app, sim } = await cacheStack(t)
  await app.inject({ url: '/profile/warm-up', remoteAddress: '10.0.0.1' }) // the token and the first compilation: not a cold miss's cost
  // A client not seen before: its count goes to Redis with the next sync, and the request must not wait for it.
  const miss = await roundTripsOf(app, '/profile/cold-trips', '10.0.0.2')
  t.equal(miss.statusCode, 200)
  t.equal(miss.cache, 'MISS')
  t.equal(sim.callsFor('profile', 'cold-trips'), 1)
  t.ok(miss.awaited <= 2, `${miss.awaited} awaited round trips (${miss.commands.join(' ')})`)
  const hit = await roundTripsOf(app, '/profile/cold-trips', '10.0.0.1')
  t.equal(hit.cache, 'HIT')
  t.equal(hit.awaited, 0, 'a hit held here waits for none')
})

/**
 * The commands about `username` the app's Redis client sends while its profile is answered, and in the turns after
 * (a claim nobody took is released then): `eval:read-or-claim` for the read that claims, `eval` for another script.
 */
async function commandsFor (app: FastifyInstance, username: string): Promise<{ code: string, commands: string[] }> {
  const client = app.redisLayer?.client
  if (client === undefined) throw new Error('the app has no Redis')
  const commands: string[] = []
  const original = client.sendCommand
  client.sendCommand = function (this: typeof client, command: Command, ...rest: unknown[]) {
    const args = command.args.map(String)
    if (args.some((arg) => arg.includes(`{${username}}`))) commands.push(args[0] === READ_OR_CLAIM ? 'eval:read-or-claim' : command.name)
    return (original as (...args: unknown[]) => unknown).call(this, command, ...rest)
  } as typeof client.sendCommand
  try {
    const res = await app.inject(`/profile/${username}`)
    for (let turn = 0; turn < 3; turn++) await new Promise(setImmediate)
    return { code: res.statusCode === 200 ? '200' : String(res.json<{ code?: string }>().code), commands }
  } finally {
    client.sendCommand = original
  }
}

t.test('a miss the upstream would refuse at once reads without claiming its load: one plain read, no lock taken and released (issue 33 point 5)', async (t) => {
  const refusals = [
    // With a token held: a cold miss claims its load with its read, until the upstream asks for a pause.
    { why: 'a back-off (the upstream asked for a pause)', code: 'UPSTREAM_RATE_LIMITED', tokenFirst: true, fail: (sim: Simulator) => { sim.failNext({ kind: 'status', status: 429, retryAfter: '300' }) } },
    // No token yet: the first miss's exchange fails, and the back-off of the identity provider's failures begins.
    { why: 'no token (the identity provider fails)', code: 'UPSTREAM_AUTH_FAILED', tokenFirst: false, fail: (sim: Simulator) => { sim.failTokenNext({ kind: 'status', status: 503 }, 10) } }
  ]
  for (const { why, code, tokenFirst, fail } of refusals) {
    const { app, sim } = await cacheStack(t, { env: { RATE_LIMIT_PER_MINUTE: '0' } })
    if (tokenFirst) {
      const cold = await commandsFor(app, 'claimed-cold')
      t.equal(cold.code, '200')
      t.same(cold.commands[0], 'eval:read-or-claim', 'a cold miss the upstream may answer claims its load with its read')
    }
    fail(sim)
    t.equal((await app.inject('/profile/refusal-starts')).json<{ code: string }>().code, code, why)
    const calls = sim.stats.dataCalls
    const refused = await commandsFor(app, 'refused-cold')
    t.equal(refused.code, code, `${why}: refused at once`)
    t.same(refused.commands, ['hgetall'], `${why}: one plain read, no claim nor release`)
    t.equal(sim.stats.dataCalls, calls, 'and no upstream call')
  }
})
