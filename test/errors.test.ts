import t from 'tap'
import * as errors from '../src/errors.js'

t.test('every error export is named after its code and has a fixed status', async (t) => {
  const constructors = Object.entries(errors).filter(([, value]) => typeof value === 'function' && 'prototype' in value && value.name === 'FastifyError')
  t.ok(constructors.length >= 10)
  for (const [name, Constructor] of constructors) {
    const error = new (Constructor as new (...args: unknown[]) => { code: string, statusCode: number })('x', 'y')
    t.equal(error.code, name)
    t.ok(error.statusCode >= 400 && error.statusCode < 600, name)
  }
})
