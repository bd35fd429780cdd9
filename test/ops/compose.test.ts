import { existsSync, readFileSync } from 'node:fs'
import t from 'tap'
import { parse } from 'yaml'
import { ConfigSchema, loadConfig } from '../../src/config.js'

interface Service {
  image?: string
  build?: string
  command?: string[]
  ports?: string[]
  environment?: Record<string, string>
  healthcheck?: { test: string[] }
  depends_on?: Record<string, { condition: string }>
  stop_grace_period?: string
}

const root = new URL('../../', import.meta.url)
const read = (path: string): string => readFileSync(new URL(path, root), 'utf8')
const compose = parse(read('docker-compose.yml')) as { services: Record<string, Service> }
const { services } = compose

/** Compose's interpolation of `${NAME:-default}` and `${NAME}`, with nothing set in the shell. */
function interpolate (value: string): string {
  return value.replace(/\$\{\w+(?::?-([^}]*))?\}/g, (_match, fallback?: string) => fallback ?? '')
}

function service (name: string): Service {
  const found = services[name]
  if (found === undefined) throw new Error(`no service ${name}`)
  return found
}

/** The URL a healthcheck command fetches. */
function healthUrl (check: Service['healthcheck']): URL {
  const url = check?.test.join(' ').match(/https?:\/\/[^'"]+/)?.[0]
  if (url === undefined) throw new Error('the healthcheck fetches no URL')
  return new URL(url)
}

const bffEnv = Object.fromEntries(Object.entries(service('bff').environment ?? {}).map(([key, value]) => [key, interpolate(String(value))]))
const upstreamEnv = service('upstream').environment ?? {}

t.test('three services: Redis, the upstream simulator and the BFF', async (t) => {
  t.same(Object.keys(services).sort(), ['bff', 'redis', 'upstream'])
  t.match(service('redis').image, /^redis:\d/)
  t.equal(service('upstream').build, '.')
  t.equal(service('bff').build, '.')
})

t.test('every service has a healthcheck, and the BFF waits for healthy Redis and upstream', async (t) => {
  t.same(service('redis').healthcheck?.test, ['CMD', 'redis-cli', 'ping'])
  const upstreamCheck = healthUrl(service('upstream').healthcheck)
  t.equal(upstreamCheck.port, upstreamEnv.SIM_PORT, 'the simulator\'s check asks its own port')
  const bffCheck = healthUrl(service('bff').healthcheck)
  t.equal(bffCheck.pathname, '/readyz')
  t.equal(bffCheck.port, bffEnv.PORT, 'the BFF\'s check asks its own port')
  t.same(service('bff').depends_on, { redis: { condition: 'service_healthy' }, upstream: { condition: 'service_healthy' } })
})

t.test('the BFF publishes its listen port', async (t) => {
  t.same(service('bff').ports, [`${bffEnv.PORT}:${bffEnv.PORT}`])
  t.equal(bffEnv.HOST, '0.0.0.0', 'reachable from outside its container')
})

t.test('every variable of the BFF is a configuration variable, and together they pass loadConfig', async (t) => {
  const known = Object.keys(ConfigSchema.properties)
  for (const key of Object.keys(bffEnv)) t.ok(known.includes(key), `${key} is in ConfigSchema`)
  const config = loadConfig(bffEnv)
  t.equal(config.ADMIN_TOKEN, undefined, 'ADMIN_TOKEN left unset in the shell: no admin route')
  t.match(service('bff').environment?.ADMIN_TOKEN, /^\$\{ADMIN_TOKEN:-\}$/, 'taken from the shell when set there')

  t.equal(new URL(config.REDIS_URL ?? '').hostname, 'redis', 'Redis is the redis service')
  for (const url of [config.UPSTREAM_BASE_URL, config.AUTH_URL]) {
    t.equal(new URL(url).hostname, 'upstream', url)
    t.equal(new URL(url).port, upstreamEnv.SIM_PORT, url)
  }
  t.equal(config.CLIENT_ID, upstreamEnv.CLIENT_ID, 'the simulator issues tokens to these credentials')
  t.equal(config.CLIENT_SECRET, upstreamEnv.CLIENT_SECRET)
  t.equal(config.AUDIENCE ?? config.UPSTREAM_BASE_URL, upstreamEnv.AUDIENCE, 'the simulator expects this audience')

  const grace = /^(\d+)s$/.exec(service('bff').stop_grace_period ?? '')?.[1]
  t.ok(Number(grace) * 1000 > config.SHUTDOWN_TIMEOUT_MS, 'Docker waits longer than the server\'s own shutdown bound')
})

t.test('the simulator service runs a file the build produces', async (t) => {
  const command = service('upstream').command ?? []
  t.same(command.slice(0, 1), ['node'])
  const built = command[1] ?? ''
  t.match(built, /^dist\/dev\/(.+)\.js$/)
  const source = built.replace(/^dist\/dev\/(.+)\.js$/, 'dev/$1.ts')
  t.ok(existsSync(new URL(source, root)), `${source} exists`)
  const devConfig = JSON.parse(read('dev/tsconfig.json')) as { include: string[], compilerOptions: { outDir: string } }
  t.ok(devConfig.include.includes(source.replace('dev/', '')), 'and dev/tsconfig.json compiles it')
  t.equal(devConfig.compilerOptions.outDir, '../dist/dev')
})

t.test('the Dockerfile: multi-stage, production dependencies only, non-root, with a healthcheck', async (t) => {
  const dockerfile = read('Dockerfile')
  const stages = dockerfile.split(/^FROM /m).slice(1)
  t.equal(stages.length, 2, 'a build stage and a runtime stage')
  const runtime = stages[1] ?? ''
  t.match(runtime, /^RUN npm ci --omit=dev/m, 'only production dependencies in the image')
  t.match(runtime, /^COPY --from=build \/app\/dist \.\/dist$/m, 'only the compiled code from the build')
  t.notMatch(runtime, /^COPY (src|dev|test)/m)
  t.match(runtime, /^USER node$/m)
  t.match(runtime, /^HEALTHCHECK .*\n.*\/healthz/m)
  t.match(runtime, /^CMD \["node", "dist\/server\.js"\]$/m)
  const ignored = read('.dockerignore').split('\n')
  for (const entry of ['node_modules', '.env', 'dist']) t.ok(ignored.includes(entry), `.dockerignore keeps out ${entry}`)
})
