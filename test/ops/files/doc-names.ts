import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import t from 'tap'
import { ConfigSchema } from '../../../src/config.ts'
import { PrometheusTelemetry } from '../../../src/telemetry/prometheus-telemetry.ts'

// The docs cannot drift from the code: every backticked name of this project in README.md and docs/*.md (a path, an
// environment variable, a metric, a class, function or method) must still exist. History (performance-history.md) is exempt.

const root = new URL('../../../', import.meta.url)
const read = (path: string): string => readFileSync(new URL(path, root), 'utf8')
const tracked = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: root, encoding: 'utf8' })
  .split('\n').filter((path) => path !== '' && !path.startsWith('node_modules/') && existsSync(new URL(path, root)))
const documents = tracked.filter((path) => path === 'README.md' || (/^docs\/[^/]+\.md$/.test(path) && path !== 'docs/performance-history.md'))
const code = tracked.filter((path) => /\.(ts|js|cjs|mjs|lua|sh|yml|yaml|json)$|^Dockerfile$|^\.ci\/run$|^\.env\.example$/.test(path) && path !== 'package-lock.json' && path !== 'test/ops/files/doc-names.ts')
  .map((path) => read(path)).join('\n')

/** Names of Node, Redis, the libraries and the web that the docs mention: not ours to check. */
const EXTERNAL = new Set([
  'AbortController', 'AbortSignal', 'AbortSignal.any', 'AbortSignal.timeout', 'Error.stackTraceLimit', 'JSON.parse', 'JSON.stringify',
  'process.cpuUsage', 'process.hrtime', 'setImmediate', 'setTimeout', 'structuredClone', 'queueMicrotask', 'WeakMap', 'WeakRef', 'TextEncoder',
  'NODE_OPTIONS', 'NODE_ENV', 'OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_SERVICE_NAME', 'OTEL_TRACES_SAMPLER', 'OTEL_TRACES_SAMPLER_ARG',
  'XDG_CACHE_HOME', 'HOME', 'PATH', 'OTEL_EXPORTER_OTLP_HEADERS',
  'AbortError', 'TimeoutError', 'ReplyError', 'NodeSDK', 'DecoratorHandler', 'CircuitBreakerPolicy', 'RuntimeDefault',
  'request.routeOptions', 't.jobs', 'preHandler', 'http.response.status_code', 'db.namespace', 'Redis.prototype.sendCommand',
  // Built by `npm test` and `npm run build`, not kept in git.
  'client/dist'
])

interface Claim { document: string, name: string }

/** Backticked spans outside fenced blocks. */
function backticked (document: string): Claim[] {
  const text = read(document).replace(/^```[\s\S]*?^```/gm, '')
  return [...text.matchAll(/`([^`\n]+)`/g)].map((match) => ({ document, name: (match[1] ?? '').trim() }))
}

const claims = documents.flatMap(backticked)
const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** A project path: under one of our folders, or a file name with one of our endings; a `*` matches within a segment. */
function pathExists (name: string): boolean {
  const path = name.replace(/(:\d+(-\d+)?|#[\w-]+)$/, '').replace(/\/$/, '')
  const pattern = new RegExp(`(^|/)${escape(path).replace(/\\\*/g, '[^/]*')}($|/)`)
  return tracked.some((file) => pattern.test(file))
}

/** Defined in our code: a declaration, a method, a property or a private member of that name. */
function defined (identifier: string): boolean {
  const name = escape(identifier.replace(/^#/, ''))
  return new RegExp(`(class|interface|type|function|const|let|enum|get|set)\\s+#?${name}\\b|(^|[\\s{,(])(async\\s+|static\\s+|readonly\\s+)*#?${name}\\s*[(<:=?]|\\b${name}\\??:`, 'm').test(code)
}

type Kind = 'path' | 'variable' | 'metric' | 'identifier'

function kindOf (name: string): Kind | undefined {
  if (/^(src|test|bench|deploy|dev|client|scripts|docs|examples)\/[\w./*-]+(:\d+(-\d+)?)?$/.test(name)) return 'path'
  if (/^[\w-]+(\/[\w-]+)*\.(ts|lua|sh|yml|yaml|json|md)$/.test(name)) return 'path'
  if (/^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$/.test(name.replace(/=.*$/, ''))) return 'variable'
  if (/^pbff_[a-z_]+/.test(name)) return 'metric'
  // camelCase or PascalCase of two words or more, a member (a.b), a private member, or a call: shapes of code, not of values or headers.
  if (/^(new )?#?[A-Za-z_$][\w$]*(\.#?[A-Za-z_$][\w$]*)*(\(\))?$/.test(name) && /[a-z][A-Z]|\.|\(\)$|^#/.test(name)) return 'identifier'
  return undefined
}

const registered = (async (): Promise<Set<string>> => {
  const exposition = await new PrometheusTelemetry().render()
  return new Set([...exposition.matchAll(/^# TYPE (pbff_\w+) /gm)].map((match) => match[1] ?? ''))
})()

async function exists (kind: Kind, name: string): Promise<boolean> {
  if (EXTERNAL.has(name.replace(/\(\)$/, '').replace(/^new /, ''))) return true
  switch (kind) {
    case 'path': return pathExists(name)
    case 'variable': {
      const variable = name.replace(/=.*$/, '')
      return variable in ConfigSchema.properties || new RegExp(`\\b${variable}\\b`).test(code)
    }
    case 'metric': {
      const metric = (name.match(/^pbff_[a-z_]+/)?.[0] ?? name).replace(/_(bucket|sum|count)$/, '')
      return (await registered).has(metric)
    }
    case 'identifier': {
      const members = name.replace(/^new /, '').replace(/\(\)$/, '').split('.')
      const last = members[members.length - 1] ?? name
      // An alert or a panel is named in the manifests, as a value.
      return defined(last) || new RegExp(`:\\s*${escape(last)}\\s*$`, 'm').test(code)
    }
  }
}

t.test('every backticked name of this project in README.md and docs/*.md exists in the code', async (t) => {
  const checked = new Map<Kind, number>()
  const missing: string[] = []
  for (const { document, name } of claims) {
    const kind = kindOf(name)
    if (kind === undefined) continue
    checked.set(kind, (checked.get(kind) ?? 0) + 1)
    if (!await exists(kind, name)) missing.push(`${document}: \`${name}\` (${kind})`)
  }
  // The check must have read something of each kind, or it proves nothing.
  for (const kind of ['path', 'variable', 'metric', 'identifier'] as const) t.ok((checked.get(kind) ?? 0) > 0, `names of kind ${kind} checked`)
  t.same(missing, [], 'names the docs give that the code does not have')
})

t.test('the check finds a name the code does not have, of each kind', async (t) => {
  for (const [kind, name] of [['path', 'src/cache/memory-store.ts'], ['variable', 'CACHE_MAX_ENTRIES'], ['metric', 'pbff_awaited_revalidations_total'], ['identifier', 'MemoryStore'], ['identifier', 'flights.revalidate']] as const) {
    t.equal(kindOf(name), kind, `${name} is read as a ${kind}`)
    t.notOk(await exists(kind, name), `${name} is missing`)
  }
})
