import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * The hit path's devices (code that does by hand, for speed, what a plain library call would do) and the
 * production defaults that cost a hit something, each as a variant of the built service: the same `dist/`
 * with one edit. `npm run bench:devices` measures every variant against the service as it ships.
 */
export interface Patch {
  /** A file of `dist/`, e.g. `server.js`. */
  file: string
  /** Text found exactly once in that file (tsc's output: no types, semicolons added). */
  find: string
  replace: string
}

export interface Variant {
  name: string
  /** A device, measured against the plain call it replaces; or a default, measured against its absence. */
  kind: 'device' | 'default'
  /** What the service does, where. */
  what: string
  /** What the variant does instead. */
  instead: string
  patches: Patch[]
  /** The service's variables the variant sets (a default switched off). */
  env?: Record<string, string>
}

export const VARIANTS: readonly Variant[] = [
  {
    name: 'batched-log-output',
    kind: 'device',
    what: 'BatchedLogOutput (src/logging/logging.ts): access lines encoded into a 16 KiB buffer, one write when full or after 100 ms',
    instead: 'pino\'s default destination (SonicBoom on stdout, writing what came while its last write was in flight)',
    patches: [{ file: 'server.js', find: ': { stream: batchedStdout() })', replace: ': {})' }]
  },
  {
    name: 'held-hit',
    kind: 'device',
    what: 'a fresh entry this process holds answered without a promise (CacheStack.lookup, serve)',
    instead: 'every lookup through the store\'s promise, and an async handler that awaits the lookup and the send',
    patches: [
      {
        file: 'cache/cache-stack.js',
        find: 'if (held !== undefined && isFresh(held, now))\n            return this.#reported(resource, this.#hit(key, resource, held, load, now));',
        replace: ''
      },
      {
        file: 'routes/profiles.js',
        find: '(request, reply) => serve(reply, lookups.profile(request.params.username, callerSignal(request), reply), encodings)',
        replace: 'async (request, reply) => { await serve(reply, await lookups.profile(request.params.username, callerSignal(request), reply), encodings); return reply; }'
      }
    ]
  },
  {
    name: 'rate-limit-hook',
    kind: 'device',
    what: 'the rate limit\'s own callback hook on each counted route (src/plugins/rate-limit.ts)',
    instead: '@fastify/rate-limit, same limit and window',
    patches: [{
      file: 'plugins/rate-limit.js',
      find: 'const counts = redisLayer === undefined',
      replace: 'await app.register((await import(\'@fastify/rate-limit\')).default, { max, timeWindow: RATE_LIMIT_WINDOW_MS });\n' +
        '    app.decorate(\'chargeRateLimit\', () => { });\n    return;\n    const counts = redisLayer === undefined'
    }]
  },
  {
    name: 'load-shedding-hook',
    kind: 'device',
    what: 'load shedding asked from one callback hook (src/plugins/load-shedding.ts), under-pressure in a scope of its own',
    instead: '@fastify/under-pressure registered for the whole app, with its own hook on every request',
    patches: [
      {
        file: 'plugins/load-shedding.js',
        find: 'await app.register(async (scope) => {\n        await scope.register(underPressure, { ...DEFAULT_LOAD_SHEDDING, ...options });\n        measuring = scope;\n    });',
        replace: 'await app.register(underPressure, { ...DEFAULT_LOAD_SHEDDING, ...options });\n    return;'
      }
    ]
  },
  {
    name: 'helmet-headers',
    kind: 'device',
    what: 'helmet\'s headers found once, set with the answer-headers block (src/plugins/security-headers.ts)',
    instead: 'helmet\'s middleware made and run on every request, as @fastify/helmet does',
    patches: [{
      file: 'plugins/security-headers.js',
      find: 'app.answerHeaders.add(helmetHeaders(API_HELMET_OPTIONS));',
      replace: 'app.addHook(\'onRequest\', (request, reply, done) => { helmet(API_HELMET_OPTIONS)(request.raw, reply.raw, done); });'
    }]
  },
  {
    name: 'cors-headers',
    kind: 'device',
    what: 'the CORS headers of a simple request found once per origin, set with the answer-headers block (src/plugins/cors.ts); measured with CORS_ORIGINS=*',
    instead: '@fastify/cors registered for the whole app, with its hook on every request',
    patches: [{
      file: 'plugins/cors.js',
      find: 'app.answerHeaders.add(await simpleRequestHeaders(options, origins));',
      replace: 'await app.register(cors, options);\n    return;'
    }]
  },
  {
    name: 'access-line',
    kind: 'default',
    what: 'the access line, one per request at LOG_LEVEL=info',
    instead: 'LOG_LEVEL=warn: no access line',
    patches: [],
    env: { LOG_LEVEL: 'warn' }
  },
  {
    name: 'request-metrics',
    kind: 'default',
    what: 'the request counter and latency histogram (src/plugins/telemetry.ts)',
    instead: 'no onResponse hook',
    patches: [{ file: 'plugins/telemetry.js', find: 'app.addHook(\'onResponse\'', replace: 'if (false) app.addHook(\'onResponse\'' }]
  },
  {
    name: 'rate-limit',
    kind: 'default',
    what: 'the rate limit, counted per client address',
    instead: 'RATE_LIMIT_PER_MINUTE=0: no limit',
    patches: [],
    env: { RATE_LIMIT_PER_MINUTE: '0' }
  }
]

/** `source` with each patch applied; a patch whose text is not there exactly once names itself (the code it edits changed). */
export function applyPatches (source: string, patches: readonly Patch[], variant: string): string {
  return patches.reduce((text, { file, find, replace }) => {
    const count = text.split(find).length - 1
    if (count !== 1) throw new Error(`variant ${variant}: ${file} holds ${count} copies of ${JSON.stringify(find.slice(0, 80))}, not one: update its patch`)
    return text.replace(find, () => replace)
  }, source)
}

/** Edits, in place, the copy of dist/ at `dir` into `variant`. Returns the files it changed. */
export function applyVariant (dir: string, variant: Variant): string[] {
  const files = [...new Set(variant.patches.map((patch) => patch.file))]
  for (const file of files) {
    const path = join(dir, file)
    writeFileSync(path, applyPatches(readFileSync(path, 'utf8'), variant.patches.filter((patch) => patch.file === file), variant.name))
  }
  return files.map((file) => join(dir, file))
}
