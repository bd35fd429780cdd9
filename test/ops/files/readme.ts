import { readFileSync } from 'node:fs'
import t from 'tap'
import type { TSchema } from '@sinclair/typebox'
import { ConfigSchema } from '../../../src/config.ts'
import { PrometheusTelemetry } from '../../../src/telemetry/prometheus-telemetry.ts'
import { ReadinessBody } from '../../../src/routes/health.ts'

const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8')

/** The text of a `## title` section, up to the next `## `. */
function section (title: string): string {
  const start = readme.indexOf(`\n## ${title}\n`)
  if (start === -1) throw new Error(`README has no "## ${title}" section`)
  const end = readme.indexOf('\n## ', start + 1)
  return readme.slice(start, end === -1 ? undefined : end)
}

/** The rows of the table whose header line is `header`, as arrays of cells. */
function table (text: string, header: string): string[][] {
  const start = text.indexOf(header)
  if (start === -1) throw new Error(`no table headed ${header}`)
  const rows: string[][] = []
  for (const line of text.slice(start).split('\n').slice(2)) {
    if (!line.startsWith('|')) break
    rows.push(line.slice(1, -1).split(' | ').map((cell) => cell.trim()))
  }
  return rows
}

const operations = section('Operations')

t.test('the configuration table lists every variable of the schema, with its default, and nothing else', async (t) => {
  const rows = table(section('Configuration'), '| variable | default | meaning |')
  const documented = new Map<string, string>()
  for (const [names = '', defaultCell = ''] of rows) {
    for (const name of names.split(',').map((cell) => cell.trim().replace(/^`|`$/g, ''))) documented.set(name, defaultCell)
  }
  const properties: Record<string, TSchema> = ConfigSchema.properties
  const required: readonly string[] = ConfigSchema.required
  t.same([...documented.keys()].sort(), Object.keys(properties).sort())
  for (const [name, schema] of Object.entries(properties)) {
    const cell = documented.get(name)
    if (schema.default !== undefined) {
      t.equal(cell, `\`${String(schema.default)}\``, `${name}: its default`)
    } else if (required.includes(name)) {
      t.equal(cell, 'required', `${name}: required`)
    } else {
      t.match(cell, /^(unset|`[A-Z_]+`)$/, `${name}: optional, unset or defaulting to another variable`)
    }
  }
})

t.test('the metric table lists every metric the service registers, with its type, and nothing else', async (t) => {
  const exposition = await new PrometheusTelemetry().render()
  const registered = new Map([...exposition.matchAll(/^# TYPE (pbff_\w+) (\w+)$/gm)].map((match) => [match[1] ?? '', match[2] ?? '']))
  t.ok(registered.size >= 10)
  const rows = table(operations, '| metric | type | labels | what it counts |')
  const documented = new Map(rows.map(([name = '', type = '']) => [name.replace(/`/g, ''), type]))
  t.same([...documented.keys()].sort(), [...registered.keys()].sort())
  for (const [name, type] of registered) t.equal(documented.get(name), type, name)
  t.match(operations, /Node's default process\s+metrics/)
})

t.test('the health routes are described with every value /readyz can report, and only its fields', async (t) => {
  t.match(operations, /`GET \/healthz`/)
  t.match(operations, /`GET \/readyz`/)
  const body = /`GET \/readyz` \| readiness: `200 \{([^}]*)\}`/.exec(operations)?.[1] ?? ''
  t.same(body.split(',').map((field) => field.trim().replace(/"/g, '')).sort(), Object.keys(ReadinessBody.properties).sort())
  for (const [field, schema] of Object.entries(ReadinessBody.properties)) {
    t.match(operations, `\`${field}\``, field)
    for (const literal of ((schema as TSchema).anyOf ?? []) as TSchema[]) t.match(operations, `\`${String(literal.const)}\``, `${field}: ${String(literal.const)}`)
  }
})

t.test('the operations section says how to run N instances behind a load balancer on one Redis', async (t) => {
  const heading = '### N instances behind a load balancer, on one Redis'
  t.ok(operations.includes(heading), 'a section of its own')
  const scaling = operations.slice(operations.indexOf(heading))
  for (const needed of ['REDIS_URL', 'CACHE_KEY_PREFIX', 'TRUST_PROXY', '/readyz', '/healthz', 'SHUTDOWN_TIMEOUT_MS']) t.match(scaling, needed)
  t.match(operations, /docker compose up --build/)
})

t.test('every `npm run` command the README names is a script of the package it names', async (t) => {
  const scripts = (file: string): Record<string, string> => JSON.parse(readFileSync(new URL(file, import.meta.url), 'utf8')).scripts
  const packages = new Map([['', scripts('../../../package.json')], ['client', scripts('../../../client/package.json')]])
  const named = [...readme.matchAll(/npm run ([\w:-]+)(?: -w (\w+))?/g)]
  t.ok(named.length >= 5)
  for (const [command, script = '', workspace = ''] of named) t.ok(packages.get(workspace)?.[script], command)
})
