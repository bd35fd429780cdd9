import { spawn, spawnSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import t from 'tap'
import { imageNodeOptions } from '../../../bench/container.ts'
import { buildApp } from '../../../src/app.ts'
import { eventually, freePort, NO_DELAY_SHEDDING, simulator, testConfig } from '../../helper.ts'
import { request } from 'undici'
import { run } from './run.ts'

const root = new URL('../../../', import.meta.url)
const read = (path: string): string => readFileSync(new URL(path, root), 'utf8')
const dockerfile = read('Dockerfile')
const stages = dockerfile.split(/^(?=FROM )/m).filter((text) => text.startsWith('FROM '))
const HEALTHCHECK = new URL('scripts/healthcheck.sh', root).pathname

function stage (name: string): string {
  const found = stages.find((text) => text.split('\n')[0]?.endsWith(` AS ${name}`))
  if (found === undefined) throw new Error(`no stage ${name}`)
  return found
}

t.test('every stage starts from the base image pinned to the runtime of .nvmrc', async (t) => {
  const version = read('.nvmrc').trim().replace(/^v/, '')
  t.ok(stages.length >= 3)
  for (const text of stages) t.match(text.split('\n')[0], new RegExp(`^FROM node:${version.replace(/\./g, '\\.')}-bookworm-slim AS [\\w-]+$`))
})

t.test('the service is the default (last) target: production dependencies and compiled code only, non-root', async (t) => {
  const service = stage('service')
  t.equal(stages.at(-1), service, '`docker build .` builds the service')
  const copies = [...service.matchAll(/^COPY (.+)$/gm)].map((match) => match[1])
  t.same(copies, [
    'package.json ./',
    '--from=production-deps /app/node_modules ./node_modules',
    '--from=build /app/service/dist ./dist',
    '--chmod=0555 scripts/healthcheck.sh /usr/local/bin/healthcheck'
  ], 'nothing else enters the image: no sources, no simulator, no dev dependencies')
  t.match(stage('production-deps'), /^RUN npm ci --omit=dev /m)
  t.match(stage('build'), /&& rm -r service\/dist\/dev$/m, 'the simulator\'s compiled code is left out of the service\'s')
  t.match(service, /^USER 1000:1000$/m, 'numeric, so that Kubernetes\' runAsNonRoot can check it')
  t.notMatch(service, /^RUN /m, 'no build step runs in the final image')
  t.match(service, /^HEALTHCHECK .* CMD \["healthcheck", "\/healthz"\]$/m)
  t.match(service, /^CMD \["node", "dist\/server\.js"\]$/m)
  t.match(stage('simulator'), /^USER 1000:1000$/m)
})

t.test('the service\'s heap is sized from its container\'s memory limit, and Node takes the options from NODE_OPTIONS', async (t) => {
  const options = imageNodeOptions(dockerfile)
  t.match(stage('service'), /^ENV NODE_OPTIONS="[^"]+"$/m, 'an ENV of the service stage')
  t.match(options, /(?:^| )--max-old-space-size-percentage=25(?: |$)/, 'a quarter of the memory limit for the old generation')
  t.match(options, /(?:^| )--max-semi-space-size=16(?: |$)/, 'a young generation of a fixed size')
  t.notMatch(options, /--max-old-space-size=/, 'no fixed old generation, which would ignore the limit')
  // Here there is no container: Node takes the percentage of the machine's memory (or of this process's cgroup limit).
  const heap = await run(process.execPath, ['-p', 'JSON.stringify([v8.getHeapStatistics().heap_size_limit, Math.min(os.totalmem(), process.constrainedMemory() || Infinity)])'], {
    env: { ...process.env, NODE_OPTIONS: options }
  })
  t.equal(heap.status, 0, heap.stderr)
  const [limit = 0, memory = 0] = JSON.parse(heap.stdout) as number[]
  const mib = 1024 * 1024
  t.equal(Math.round(limit / mib), Math.floor(memory * 0.25 / mib) + 3 * 16, 'V8\'s heap limit: 25% of the memory, and 3 x 16 MiB for the young generation')
})

t.test('.dockerignore lets in only what the stages copy', async (t) => {
  const lines = read('.dockerignore').split('\n').filter((line) => line !== '' && !line.startsWith('#'))
  t.equal(lines[0], '*', 'an allow-list')
  const allowed = lines.slice(1).map((line) => line.replace(/^!/, '').replace(/\/$/, ''))
  const sources = [...dockerfile.matchAll(/^COPY (?!--from)(?:--\S+ )*(.+) \S+$/gm)].flatMap((match) => (match[1] ?? '').split(' '))
  for (const source of new Set(sources)) t.ok(allowed.includes(source), `${source} is in the build context`)
  for (const secret of ['.env', 'node_modules', 'dist', '.git']) t.notOk(allowed.includes(secret), `${secret} is not`)
})

/** Every package the service's code imports at run time (type-only imports vanish when compiled). */
function runtimeImports (dir: URL): string[] {
  const found: string[] = []
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts')) continue
    const source = readFileSync(`${entry.parentPath}/${entry.name}`, 'utf8')
    for (const [, specifier = ''] of source.matchAll(/^import (?!type )[^'"]*'([^'.][^']*)'/gm)) {
      if (!specifier.startsWith('node:')) found.push(specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0] ?? '')
    }
  }
  return [...new Set(found)].sort()
}

t.test('everything the compiled service imports is a production dependency (the image has no others)', async (t) => {
  const { dependencies } = JSON.parse(read('package.json')) as { dependencies: Record<string, string> }
  const imports = runtimeImports(new URL('src/', root))
  t.ok(imports.includes('fastify') && imports.includes('ioredis'))
  for (const name of imports) t.ok(name in dependencies, `${name} is in "dependencies"`)
  t.notOk(read('src/server.ts').includes('../dev/'), 'the service never loads the simulator')
})

/** Runs the image's health probe; resolves with its exit code. */
async function probe (path: string, port: number): Promise<number | null> {
  const child = spawn(HEALTHCHECK, [path, String(port)], { stdio: 'ignore' })
  return await new Promise((resolve) => child.once('exit', resolve))
}

t.test('the health probe: 0 for a 200, 1 for any other status or a refused connection', async (t) => {
  const sim = await simulator(t)
  const app = await buildApp({ config: testConfig(t, sim), loadShedding: NO_DELAY_SHEDDING })
  t.teardown(() => app.close())
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as { port: number }
  t.equal(await probe('/healthz', port), 0)
  t.equal(await probe('/readyz', port), 0)
  t.equal(await probe('/nowhere', port), 1, '404')
  t.equal(await probe('/healthz', await freePort()), 1, 'nothing listens')
})

/** A private mount namespace whose every mount is read-only: what `readOnlyRootFilesystem` gives a container. */
const READ_ONLY_ROOT = ['--mount', '--propagation', 'private', 'sh', '-c', 'mount -o remount,bind,ro / && exec "$0" "$@"']
const unshare = spawnSync('unshare', [...READ_ONLY_ROOT, 'true']).status === 0

t.test('the service runs, answers and shuts down on a read-only root filesystem', {
  skip: unshare ? false : 'unshare cannot make a read-only mount namespace here (it needs root)'
}, async (t) => {
  const sim = await simulator(t)
  const child = spawn('unshare', [...READ_ONLY_ROOT, process.execPath, new URL('src/server.ts', root).pathname], {
    env: {
      PATH: process.env.PATH ?? '',
      TSX_DISABLE_CACHE: '1',
      PORT: '0',
      UPSTREAM_BASE_URL: sim.baseUrl,
      AUTH_URL: sim.authUrl,
      CLIENT_ID: sim.options.clientId,
      CLIENT_SECRET: sim.options.clientSecret,
      SHUTDOWN_DELAY_MS: '0',
      // Node passes a coverage run's NODE_V8_COVERAGE on unless the key is set; its file could not be written here.
      NODE_V8_COVERAGE: ''
    },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  t.teardown(async () => { if (child.exitCode === null) child.kill('SIGKILL'); await exited })
  let output = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  const listening = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', () => { const url = /Server listening at (http:\/\/[\d.:]+)/.exec(output)?.[1]; if (url !== undefined) resolve(url) })
    exited.then((code) => reject(new Error(`exited ${code}: ${output}`)), reject)
  })
  // Ready first: a production instance sheds load while its loop lags, as a busy test machine may make it.
  await eventually(async () => {
    const readiness = await request(`${listening}/readyz`, { reset: true })
    await readiness.body.dump()
    return readiness.statusCode === 200
  }, 'ready')
  for (const path of ['/profile/alice', '/metrics', '/docs/json', '/readyz']) {
    const res = await request(`${listening}${path}`, { reset: true })
    await res.body.dump()
    t.equal(res.statusCode, 200, path)
  }
  child.kill('SIGTERM')
  // Not its exit code: run under tap (its process-tracking hooks) on a read-only root, it is 1 even after a bare /healthz
  // (0 outside tap, 0 without the read-only mount); the image runs compiled code with no such hooks.
  t.not(await exited, null, 'it exited by itself, not killed')
  t.match(output, /"msg":"closed"/, 'after closing Redis, the pools and the server')
  t.notMatch(output, /EROFS|read-only file system/i, 'nothing tried to write a file')
})
