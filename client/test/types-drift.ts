import { readFileSync } from 'node:fs'
import t from 'tap'
import { clientTypesSource, CLIENT_TYPES_FILE } from '../../dev/client-types.ts'

t.test('the committed client types are what openapi-typescript makes of the live OpenAPI document', async (t) => {
  const committed = readFileSync(CLIENT_TYPES_FILE, 'utf8')
  const live = await clientTypesSource()
  t.ok(committed === live, 'client/src/openapi.ts is out of date: run `npm run client:types` and commit it')
})
