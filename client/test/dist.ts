import { existsSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { profileOf } from '../../dev/profiles.ts'
import { stack } from '../../test/helper.ts'

const DIST = new URL('../dist/index.js', import.meta.url)

t.test('the built client (plain ESM, as browsers load it) runs in Node as it is', async (t) => {
  if (!existsSync(DIST)) throw new Error('client/dist is missing: npm run build -w client (npm test does)')
  // By URL, so that type-checking (which runs before the build) does not need client/dist.
  const built = await import(DIST.href) as typeof import('../src/index.ts')
  const { app } = await stack(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const client = built.createClient({ baseUrl: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` })
  const { data } = await client.profile('alice')
  t.same(data, { user: profileOf('alice') })
  t.equal(built.parseProfile(data.user).credits, Number(profileOf('alice').Credits?.replaceAll('.', '')))
})
