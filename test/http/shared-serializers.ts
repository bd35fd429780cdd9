import t from 'tap'
import { sharedSerializers } from '../../src/http/shared-serializers.ts'

const ROUTE = { method: 'GET', url: '/x', httpStatus: '200' }
const NAMED = { type: 'object', properties: { name: { type: 'string' } } }

t.test('a response schema is compiled once per process: apps with the same settings share its serializer', async (t) => {
  const factory = sharedSerializers()
  const first = factory({}, {})({ ...ROUTE, schema: NAMED })
  const second = factory({}, {})({ ...ROUTE, url: '/y', schema: NAMED })
  t.equal(second, first, 'the second app takes the first one\'s')
  t.equal(first({ name: 'ann', secret: 's' }), '{"name":"ann"}', 'and it serializes as the schema says')
  const equal = factory({}, {})({ ...ROUTE, schema: structuredClone(NAMED) })
  t.equal(equal, first, 'an equal schema built again (as routes build theirs, per app) takes it too')
  const other = factory({}, {})({ ...ROUTE, schema: { type: 'object', properties: { age: { type: 'string' } } } })
  t.not(other, first, 'another schema, another serializer')
  t.equal(other({ name: 'ann', age: '3' }), '{"age":"3"}')
})

t.test('other serializer options or shared schemas compile their own', async (t) => {
  const factory = sharedSerializers()
  const plain = factory({}, {})({ ...ROUTE, schema: NAMED })
  const rounded = factory({}, { rounding: 'ceil' })({ ...ROUTE, schema: NAMED })
  const withShared = factory({ 'x#': { $id: 'x#', type: 'string' } }, {})({ ...ROUTE, schema: NAMED })
  t.not(rounded, plain)
  t.not(withShared, plain)
  t.not(withShared, rounded)
})
