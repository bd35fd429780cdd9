import { readFileSync } from 'node:fs'
import t from 'tap'
import { ConfigSchema } from '../../../src/config.ts'

t.test('.env.example documents every variable of the configuration schema, and nothing else', async (t) => {
  const text = readFileSync(new URL('../../../.env.example', import.meta.url), 'utf8')
  const documented = [...text.matchAll(/^([A-Z_]+)=/gm)].map((match) => match[1])
  t.same(documented.sort(), Object.keys(ConfigSchema.properties).sort())
})
