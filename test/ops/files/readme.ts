import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import t from 'tap'
import type { TSchema } from '@sinclair/typebox'
import { ConfigSchema } from '../../../src/config.ts'
import * as errors from '../../../src/errors.ts'
import { PrometheusTelemetry } from '../../../src/telemetry/prometheus-telemetry.ts'
import { ReadinessBody } from '../../../src/routes/health.ts'

// The docs by audience: the README for a newcomer (short, its few tables true), docs/reference.md for every error,
// header, setting, /readyz field and metric, docs/operations.md for running it. Each table is checked against the code.

const root = new URL('../../../', import.meta.url)
const read = (path: string): string => readFileSync(new URL(path, root), 'utf8')
const readme = read('README.md')
const reference = read('docs/reference.md')
const operations = read('docs/operations.md')

/** The text of a `## title` section of `text`, up to the next `## `. */
function section (text: string, title: string): string {
  const start = text.indexOf(`\n## ${title}\n`)
  if (start === -1) throw new Error(`no "## ${title}" section`)
  const end = text.indexOf('\n## ', start + 1)
  return text.slice(start, end === -1 ? undefined : end)
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

/** The backticked names of a cell, `A`, `B` or `A` (+ `Header`): the names before any parenthesis. */
const names = (cell: string): string[] => [...(cell.split('(')[0] ?? '').matchAll(/`([^`]+)`/g)].map((match) => match[1] ?? '')

t.test('the configuration table lists every variable of the schema, with its default, and nothing else', async (t) => {
  const rows = table(section(reference, 'Configuration'), '| variable | default | meaning |')
  const documented = new Map<string, string>()
  for (const [cell = '', defaultCell = ''] of rows) {
    for (const name of names(cell)) documented.set(name, defaultCell)
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
  const metrics = section(reference, 'Metrics')
  const rows = table(metrics, '| metric | type | labels | what it counts |')
  const documented = new Map(rows.map(([name = '', type = '']) => [name.replace(/`/g, ''), type]))
  t.same([...documented.keys()].sort(), [...registered.keys()].sort())
  for (const [name, type] of registered) t.equal(documented.get(name), type, name)
  t.match(metrics, /Node's default process\s+metrics/)
})

t.test('/readyz is described with every value it can report, and only its fields', async (t) => {
  const readiness = section(reference, 'Readiness: /readyz')
  t.match(readiness, /`GET \/healthz`/)
  const body = /`GET \/readyz` \| readiness: `200 \{([^}]*)\}`/.exec(readiness)?.[1] ?? ''
  t.same(body.split(',').map((field) => field.trim().replace(/"/g, '')).sort(), Object.keys(ReadinessBody.properties).sort())
  for (const [field, schema] of Object.entries(ReadinessBody.properties)) {
    t.match(readiness, `- \`${field}\``, `${field} has its own line`)
    for (const literal of ((schema as TSchema).anyOf ?? []) as TSchema[]) t.match(readiness, `\`${String(literal.const)}\``, `${field}: ${String(literal.const)}`)
  }
})

t.test('the operations guide says how to run N instances, on Sentinel too, and how to size them', async (t) => {
  const scaling = section(operations, 'N instances on one Redis')
  for (const needed of ['REDIS_URL', 'CACHE_KEY_PREFIX', 'TRUST_PROXY', '/readyz', '/healthz', 'SHUTDOWN_TIMEOUT_MS', 'UPSTREAM_EXPECTED_INSTANCES', 'maxReplicas', 'REDIS_SENTINELS', 'REDIS_CLUSTER']) t.match(scaling, needed)
  t.match(operations, /docker compose up --build/)
  t.match(operations, /docker compose --profile sentinel up/)
  t.match(section(operations, 'Sizing'), /CACHE_MEMORY_MB/)
  t.match(section(operations, 'Shutdown'), /SHUTDOWN_DELAY_MS/)
})

t.test('the README stays a newcomer\'s page: short, its error table true, no machine timings', async (t) => {
  const lines = readme.split('\n').length
  t.ok(lines <= 250, `${lines} lines, at most 250`)
  const rows = table(section(readme, 'Errors'), '| situation | status | code |')
  t.ok(rows.length >= 5)
  const statuses = new Map(Object.entries(errors).flatMap(([name, value]) => {
    if (typeof value !== 'function' || value.name !== 'FastifyError') return []
    return [[name, new (value as new (...args: unknown[]) => { statusCode: number })('x', 'y').statusCode]] as const
  }))
  // A row of several statuses (the parser's refusals) lists its codes in the same order.
  for (const [, status = '', codes = ''] of rows) {
    const answered = status.split(', ').map(Number)
    const named = names(codes)
    if (answered.length > 1) t.equal(named.length, answered.length, `${status}: a code for each status`)
    named.forEach((code, i) => {
      const expected = answered.length > 1 ? answered[i] : answered[0]
      t.equal(statuses.get(code), expected, `${code} is an error of src/errors.ts, answered ${expected}`)
    })
  }
  t.match(readme, /docs\/reference\.md#errors/, 'it links the full table')
  for (const line of readme.split('\n').filter((line) => /\bnpm (test|run test)/.test(line))) {
    t.notMatch(line, /\b\d+(\.\d+)? ?(s|ms|min|minutes|seconds)\b/, `no timing in ${line.trim()}`)
  }
})

t.test('every `npm run` command the docs name is a script of the package it names', async (t) => {
  const scripts = (file: string): Record<string, string> => JSON.parse(read(file)).scripts
  const packages = new Map([['', scripts('package.json')], ['client', scripts('client/package.json')]])
  const named = [readme, reference, operations].flatMap((text) => [...text.matchAll(/npm run ([\w:-]+)(?: -w (\w+))?/g)])
  t.ok(named.length >= 5)
  for (const [command, script = '', workspace = ''] of named) t.ok(packages.get(workspace)?.[script], command)
})

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors (markdown: string): Set<string> {
  const seen = new Map<string, number>()
  const found = new Set<string>()
  for (const [, heading = ''] of markdown.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6} (.+)$/gm)) {
    const slug = heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')
    const count = seen.get(slug) ?? 0
    seen.set(slug, count + 1)
    found.add(count === 0 ? slug : `${slug}-${count}`)
  }
  return found
}

t.test('every relative link of README.md, bench/README.md and docs/*.md leads to a file, and to a heading of it', async (t) => {
  const documents = ['README.md', 'bench/README.md', ...readdirSync(new URL('docs/', root)).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)]
  const broken: string[] = []
  let checked = 0
  for (const document of documents) {
    const text = read(document).replace(/^```[\s\S]*?^```/gm, '')
    for (const [, target = ''] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue
      checked++
      const [path = '', anchor] = target.split('#')
      const file = path === '' ? document : new URL(path, new URL(document, root)).pathname.slice(new URL(root).pathname.length)
      if (!existsSync(new URL(file, root))) { broken.push(`${document}: ${target} (no such file)`); continue }
      if (anchor !== undefined && file.endsWith('.md') && !anchors(read(file)).has(anchor)) broken.push(`${document}: ${target} (no such heading)`)
    }
  }
  t.ok(checked >= 20, `${checked} links checked`)
  t.same(broken, [], 'links that lead nowhere')
})

/** The headings of a document, and the bold leads of its paragraphs and list items (`**Redis down** fails open`), emphasis dropped. */
function leads (markdown: string): string[] {
  return markdown.replace(/^```[\s\S]*?^```/gm, '').split('\n')
    .filter((line) => /^(#{1,6} |\*\*|[-*] \*\*)/.test(line))
    .map((line) => line.replace(/\*\*|`/g, '').replace(/^(#{1,6} |[-*] )/, '').trim())
}

/**
 * Where a comment or a message of a code, configuration or deploy file sends its reader, and why that is gone:
 * `README, "X"`, `docs/x.md, "X"` (a heading or a bold lead that starts so), `docs/x.md#anchor`, `the README's X section`.
 */
function brokenPointers (text: string): string[] {
  const broken: string[] = []
  const fileOf = (name: string): string | undefined => {
    const path = name === 'README' ? 'README.md' : name
    if (existsSync(new URL(path, root))) return path
    return !path.includes('/') && existsSync(new URL(`docs/${path}`, root)) ? `docs/${path}` : undefined
  }
  const sections = [
    ...[...text.matchAll(/\b((?:[\w-]+\/)*[\w.-]+\.md|README)(?:'s)?,? "([^"\n]+)"/g)].map(([, file = '', section = '']) => ({ file, section })),
    ...[...text.matchAll(/\bthe (README)'s ([A-Z][\w ]*?) section/g)].map(([, file = '', section = '']) => ({ file, section })),
    ...[...text.matchAll(/\b(README), ([A-Z][\w ]*)\)/g)].map(([, file = '', section = '']) => ({ file, section }))
  ]
  for (const { file, section } of sections) {
    const path = fileOf(file)
    if (path === undefined) broken.push(`${file}, "${section}" (no such file)`)
    else if (!leads(read(path)).some((lead) => lead.startsWith(section))) broken.push(`${file}, "${section}" (no such section)`)
  }
  for (const [, file = '', anchor = ''] of text.matchAll(/\b((?:[\w-]+\/)*[\w.-]+\.md)#([\w-]+)/g)) {
    const path = fileOf(file)
    if (path === undefined) broken.push(`${file}#${anchor} (no such file)`)
    else if (!anchors(read(path)).has(anchor)) broken.push(`${file}#${anchor} (no such heading)`)
  }
  return broken
}

t.test('every section a code, configuration or deploy file points its reader at exists', async (t) => {
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: root, encoding: 'utf8' })
    .split('\n').filter((path) => path !== '' && !path.endsWith('.md') && path !== 'package-lock.json' &&
      path !== 'test/ops/files/readme.ts' && !path.startsWith('node_modules/') && existsSync(new URL(path, root)))
  t.ok(files.some((path) => path.startsWith('src/')) && files.includes('Dockerfile') && files.includes('.env.example'))
  const broken = files.flatMap((path) => brokenPointers(read(path)).map((pointer) => `${path}: ${pointer}`))
  t.same(broken, [], 'pointers to sections that do not exist')
  // The check must see a pointer of each form, and a wrong one of each.
  t.same(brokenPointers('(docs/operations.md, "Sizing"; design.md, "Redis down fails open"; docs/reference.md#metrics; the README\'s Errors section; README, Routes)'), [])
  t.same(brokenPointers('(README, "Memory"; README "Tracing"; docs/operations.md, "Memory"; docs/nowhere.md, "Sizing"; docs/reference.md#memory; ' +
    'the README\'s Operations section; README, Configuration)').length, 7)
})
