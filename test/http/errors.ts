import { readFileSync } from 'node:fs'
import t from 'tap'
import * as errors from '../../src/errors.ts'

t.test('every error export is named after its code and has a fixed status', async (t) => {
  const constructors = Object.entries(errors).filter(([, value]) => typeof value === 'function' && 'prototype' in value && value.name === 'FastifyError')
  t.ok(constructors.length >= 10)
  for (const [name, Constructor] of constructors) {
    const error = new (Constructor as new (...args: unknown[]) => { code: string, statusCode: number })('x', 'y')
    t.equal(error.code, name)
    t.ok(error.statusCode >= 400 && error.statusCode < 600, name)
  }
})

t.test('the reference\'s error table (docs/reference.md) names every code, with its status', async (t) => {
  const reference = readFileSync(new URL('../../docs/reference.md', import.meta.url), 'utf8')
  const table = reference.slice(reference.indexOf('## Errors'), reference.indexOf('\n## ', reference.indexOf('## Errors') + 1))
  const documented = new Map([...table.matchAll(/\| (\d{3}) \| `([A-Z_]+)`/g)].map((match) => [match[2], Number(match[1])]))
  for (const [name, value] of Object.entries(errors)) {
    if (typeof value !== 'function' || value.name !== 'FastifyError') continue
    const { statusCode } = new (value as new (...args: unknown[]) => { statusCode: number })('x', 'y')
    t.equal(documented.get(name), statusCode, name)
  }
})
