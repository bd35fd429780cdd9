import { existsSync, readFileSync } from 'node:fs'
import t from 'tap'
import { parse } from 'yaml'
import { imageNodeOptions, manifestMemoryLimit, memoryBytes } from '../../../bench/container.ts'
import { ConfigSchema, loadConfig } from '../../../src/config.ts'
import { skipWithout } from '../../helpers/required-tool.ts'
import { onPath, run } from './run.ts'

interface Service {
  image?: string
  build?: { context: string, target: string }
  command?: string[]
  entrypoint?: string[]
  ports?: string[]
  profiles?: string[]
  volumes?: string[]
  read_only?: boolean
  environment?: Record<string, string>
  healthcheck?: { test: string[] }
  depends_on?: Record<string, { condition: string }>
  stop_grace_period?: string
  mem_limit?: string | number
}

const root = new URL('../../../', import.meta.url)
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

/** The path and port the image's `healthcheck PATH [PORT]` probe asks (port: the container's PORT by default). */
function probe (check: Service['healthcheck']): { path: string, port: string | undefined } {
  const [kind, command, path, port] = check?.test ?? []
  if (kind !== 'CMD' || command !== 'healthcheck' || path === undefined) throw new Error('not the image\'s healthcheck probe')
  return { path, port }
}

/** The value following `flag` in a command line. */
function option (command: string[] | undefined, flag: string): string | undefined {
  const at = command?.indexOf(flag) ?? -1
  return at === -1 ? undefined : command?.[at + 1]
}

const bffEnv = Object.fromEntries(Object.entries(service('bff').environment ?? {}).map(([key, value]) => [key, interpolate(String(value))]))
const upstreamEnv = service('upstream').environment ?? {}

const OBSERVABILITY = ['grafana', 'jaeger', 'otel-collector', 'prometheus']
const SENTINEL = ['bff-sentinel', 'redis-primary', 'redis-replica', 'sentinel-1', 'sentinel-2', 'sentinel-3']

t.test('Redis, the upstream simulator and the BFF; Prometheus, Grafana, a collector and Jaeger in the observability profile', async (t) => {
  t.same(Object.keys(services).sort(), ['bff', 'grafana', 'jaeger', 'otel-collector', 'prometheus', 'redis', 'upstream', ...SENTINEL].sort())
  for (const name of ['redis', 'upstream', 'bff']) t.equal(service(name).profiles, undefined, `${name} starts by default`)
  for (const name of OBSERVABILITY) t.same(service(name).profiles, ['observability'], name)
  for (const name of SENTINEL) t.same(service(name).profiles, ['sentinel'], name)
  for (const name of ['redis', ...OBSERVABILITY, ...SENTINEL.filter((name) => name !== 'bff-sentinel')]) t.match(service(name).image, /^[\w./-]+:v?\d+\.\d+\.\d+(-\w+)?$/, `${name}: an exact version`)
})

t.test('one image per target, each built once: the service and the simulator from the same Dockerfile', async (t) => {
  t.same(service('bff').build, { context: '.', target: 'service' })
  t.same(service('upstream').build, { context: '.', target: 'simulator' })
  t.not(service('bff').image, service('upstream').image)
  const targets = [...read('Dockerfile').matchAll(/^FROM \S+ AS (\S+)$/gm)].map((match) => match[1])
  t.ok(targets.includes('service') && targets.includes('simulator'), 'both are Dockerfile targets')
  const built = Object.values(services).filter((each) => each.build !== undefined)
  t.equal(new Set(built.map((each) => each.build?.target)).size, built.length, 'no target built twice')
})

t.test('every service has a healthcheck, and the BFF waits for healthy Redis and upstream', async (t) => {
  t.same(service('redis').healthcheck?.test, ['CMD', 'redis-cli', 'ping'])
  t.same(probe(service('upstream').healthcheck), { path: '/__sim/stats', port: upstreamEnv.SIM_PORT }, 'the simulator\'s check asks its own port')
  t.same(probe(service('bff').healthcheck), { path: '/readyz', port: undefined }, 'the BFF\'s check asks /readyz on its PORT')
  t.same(service('bff').depends_on, { redis: { condition: 'service_healthy' }, upstream: { condition: 'service_healthy' } })
})

t.test('the BFF, Prometheus and Grafana are published on the loopback interface only', async (t) => {
  t.same(service('bff').ports, [`127.0.0.1:${bffEnv.PORT}:${bffEnv.PORT}`])
  t.equal(bffEnv.HOST, '0.0.0.0', 'reachable from the other containers')
  for (const [name, each] of Object.entries(services)) {
    for (const port of each.ports ?? []) t.match(port, /^127\.0\.0\.1:\d+:\d+$/, `${name}: ${port}`)
  }
  t.equal(service('bff').read_only, true, 'the service writes no file: its root filesystem is read-only')
})

t.test('Redis has a memory limit and an eviction policy that evicts any key, least recently used first', async (t) => {
  const command = service('redis').command
  t.match(option(command, '--maxmemory'), /^\d+mb$/)
  t.equal(option(command, '--maxmemory-policy'), 'allkeys-lru')
  t.equal(option(command, '--save'), '', 'a cache: nothing persisted')
})

t.test('the observability profile mounts the rules, the dashboard, the collector\'s configuration and their provisioning from deploy/', async (t) => {
  for (const name of OBSERVABILITY) {
    for (const volume of service(name).volumes ?? []) {
      const [source = '', , mode] = volume.split(':')
      t.ok(existsSync(new URL(source, root)), `${name}: ${source} exists`)
      t.equal(mode, 'ro', `${name}: ${source} read-only`)
    }
  }
  const scrape = parse(read('deploy/prometheus/prometheus.yml')) as { scrape_configs: Array<{ metrics_path: string, dns_sd_configs: Array<{ names: string[], port: number }> }> }
  const [job] = scrape.scrape_configs
  t.equal(job?.metrics_path, '/metrics')
  t.same(job?.dns_sd_configs[0]?.names, ['bff'], 'every bff container, however many')
  t.equal(String(job?.dns_sd_configs[0]?.port), bffEnv.PORT)
})

t.test('Grafana finds the dashboard and Prometheus where compose puts them', async (t) => {
  const mounts = new Map((service('grafana').volumes ?? []).map((volume) => {
    const [source = '', target = ''] = volume.split(':')
    return [target, source]
  }))
  const providers = parse(read('deploy/grafana/provisioning/dashboards/profile-bff.yml')) as { providers: Array<{ options: { path: string } }> }
  const dashboards = providers.providers[0]?.options.path ?? ''
  t.equal(mounts.get(dashboards), './deploy/grafana/dashboards', 'the provider reads the mounted dashboards')
  t.equal(mounts.get('/etc/grafana/provisioning'), './deploy/grafana/provisioning')
  const home = service('grafana').environment?.GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH ?? ''
  t.ok(home.startsWith(`${dashboards}/`) && existsSync(new URL(`deploy/grafana/dashboards/${home.slice(dashboards.length + 1)}`, root)), `home: ${home}`)
  const sources = parse(read('deploy/grafana/provisioning/datasources/prometheus.yml')) as { datasources: Array<{ type: string, url: string }> }
  t.same(sources.datasources.map(({ type, url }) => ({ type, url })), [{ type: 'prometheus', url: 'http://prometheus:9090' }])
  t.ok(service('prometheus').ports?.some((port) => port.endsWith(':9090')), 'Prometheus listens on 9090')
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
  t.ok(Number(grace) * 1000 > config.SHUTDOWN_DELAY_MS + config.SHUTDOWN_TIMEOUT_MS,
    'Docker waits longer than the server\'s drain delay and its shutdown bound together')
})

t.test('the BFF\'s container has the manifest\'s memory limit, and the image\'s NODE_OPTIONS size the heap from it', async (t) => {
  const manifest = manifestMemoryLimit(readFileSync(new URL('deploy/kubernetes/base/deployment.yaml', root), 'utf8'))
  t.equal(memoryBytes(String(service('bff').mem_limit).replace(/m$/, 'Mi')), manifest, 'as in Kubernetes')
  t.notOk('NODE_OPTIONS' in (service('bff').environment ?? {}), 'the image\'s NODE_OPTIONS apply')
  t.match(imageNodeOptions(read('Dockerfile')), /--max-old-space-size-percentage=\d+/)
})

t.test('the simulator target runs a file the build produces', async (t) => {
  const built = /^CMD \["node", "(dist\/dev\/.+\.js)"\]$/m.exec(stage('simulator'))?.[1] ?? ''
  t.match(built, /^dist\/dev\/(.+)\.js$/)
  const source = built.replace(/^dist\/dev\/(.+)\.js$/, 'dev/$1.ts')
  t.ok(existsSync(new URL(source, root)), `${source} exists`)
  const devConfig = JSON.parse(read('dev/tsconfig.json')) as { include: string[], compilerOptions: { outDir: string } }
  t.ok(devConfig.include.includes(source.replace('dev/', '')), 'and dev/tsconfig.json compiles it')
  t.equal(devConfig.compilerOptions.outDir, '../dist/dev')
})

/** One stage of the Dockerfile, from its FROM line to the next. */
function stage (name: string): string {
  const found = read('Dockerfile').split(/^(?=FROM )/m).find((text) => text.startsWith('FROM ') && text.split('\n')[0]?.endsWith(` AS ${name}`))
  if (found === undefined) throw new Error(`no stage ${name}`)
  return found
}

t.test('the sentinel profile: a primary, its replica, three Sentinels watching it, and a BFF configured with them', async (t) => {
  // Compose merges `<<` keys (YAML 1.1): the BFF's environment is the bff service's, but for Redis.
  const merged = (parse(read('docker-compose.yml'), { merge: true }) as { services: Record<string, Service> }).services
  const env = Object.fromEntries(Object.entries(merged['bff-sentinel']?.environment ?? {}).map(([key, value]) => [key, interpolate(String(value))]))
  const config = loadConfig(env)
  t.same({ ...env, REDIS_URL: bffEnv.REDIS_URL, REDIS_SENTINELS: undefined, REDIS_SENTINEL_NAME: undefined }, { ...bffEnv, REDIS_SENTINELS: undefined, REDIS_SENTINEL_NAME: undefined },
    'the bff service\'s settings')
  t.equal(merged['bff-sentinel']?.image, service('bff').image, 'the image the bff service builds')
  t.same(option(service('redis-replica').command, '--replicaof'), 'redis-primary')
  const sentinels = (config.REDIS_SENTINELS ?? '').split(',')
  t.same(sentinels.map((address) => address.split(':')[0]), ['sentinel-1', 'sentinel-2', 'sentinel-3'], 'every Sentinel service')
  for (const name of ['sentinel-1', 'sentinel-2', 'sentinel-3']) {
    const script = merged[name]?.entrypoint?.join(' ') ?? ''
    t.match(script, `sentinel monitor ${config.REDIS_SENTINEL_NAME} redis-primary 6379 2`, `${name} watches the primary by the BFF's name for it`)
    t.match(script, `port ${sentinels[0]?.split(':')[1]}`, `${name} listens where the BFF looks`)
  }
  for (const name of ['redis-primary', 'redis-replica']) {
    t.equal(option(service(name).command, '--maxmemory-policy'), option(service('redis').command, '--maxmemory-policy'), `${name}: a cache like redis`)
  }
})

t.test('docker-compose parses the file, observability and sentinel profiles included', {
  skip: skipWithout(onPath('docker-compose'), 'docker-compose is not installed here')
}, async (t) => {
  const parsed = await run('docker-compose', ['--profile', 'observability', '--profile', 'sentinel', 'config'], {
    cwd: root, env: { PATH: process.env.PATH ?? '' }
  })
  t.equal(parsed.status, 0, parsed.stderr)
  const resolved = parse(parsed.stdout) as { services: Record<string, Service> }
  t.same(Object.keys(resolved.services).sort(), Object.keys(services).sort())
  t.equal(resolved.services.bff?.environment?.ADMIN_TOKEN, '', 'an unset ADMIN_TOKEN interpolates to nothing')
  t.equal(resolved.services.bff?.environment?.OTEL_EXPORTER_OTLP_ENDPOINT, '', 'no tracing unless the shell asks for it')
  t.equal(resolved.services.bff?.mem_limit, service('bff').mem_limit, 'the memory limit is kept')
})

t.test('traces: the BFF can send them to the collector, which forwards them to Jaeger, which Grafana reads; exemplars lead there', async (t) => {
  const collector = parse(read('deploy/otel-collector/config.yaml')) as {
    receivers: { otlp: { protocols: { http: { endpoint: string } } } }
    exporters: Record<string, { endpoint: string }>
    service: { pipelines: { traces: { receivers: string[], exporters: string[] } } }
  }
  const documented = /OTEL_EXPORTER_OTLP_ENDPOINT=(http:\/\/[\w-]+:\d+) docker compose --profile observability up/.exec(read('docker-compose.yml'))?.[1] ?? ''
  const endpoint = new URL(documented)
  t.equal(endpoint.hostname, 'otel-collector', 'the compose file\'s header names the collector service')
  t.equal(collector.receivers.otlp.protocols.http.endpoint, `0.0.0.0:${endpoint.port}`, 'where the collector listens for OTLP/HTTP')
  t.same(loadConfig({ ...bffEnv, OTEL_EXPORTER_OTLP_ENDPOINT: documented }).OTEL_EXPORTER_OTLP_ENDPOINT, documented, 'a valid configuration')
  t.equal(bffEnv.OTEL_EXPORTER_OTLP_ENDPOINT, '', 'off unless the shell sets it')
  const { traces } = collector.service.pipelines
  t.same(traces.receivers, ['otlp'])
  t.same(traces.exporters.map((name) => collector.exporters[name]?.endpoint), ['jaeger:4317'], 'to Jaeger\'s OTLP port')
  t.same(service('otel-collector').depends_on as unknown, ['jaeger'])

  const jaeger = parse(read('deploy/grafana/provisioning/datasources/jaeger.yml')) as { datasources: Array<{ type: string, uid: string, url: string }> }
  t.same(jaeger.datasources.map(({ type, uid, url }) => ({ type, uid, url })), [{ type: 'jaeger', uid: 'jaeger', url: 'http://jaeger:16686' }])
  t.ok(service('jaeger').ports?.some((port) => port.endsWith(':16686')), 'Jaeger\'s UI and API on 16686')
  const prometheus = parse(read('deploy/grafana/provisioning/datasources/prometheus.yml')) as {
    datasources: Array<{ jsonData?: { exemplarTraceIdDestinations?: Array<{ name: string, datasourceUid: string }> } }>
  }
  t.same(prometheus.datasources[0]?.jsonData?.exemplarTraceIdDestinations, [{ name: 'trace_id', datasourceUid: 'jaeger' }], 'the exemplar label the service writes')
  t.ok(service('prometheus').command?.includes('--enable-feature=exemplar-storage'), 'Prometheus keeps exemplars')
})
