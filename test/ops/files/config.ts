import { createServer, type AddressInfo } from 'node:net'
import t from 'tap'
import { ConfigSchema, loadConfig } from '../../../src/config.ts'
import { tracesEndpoint } from '../../../src/telemetry/tracing.ts'
import { REDIS_URL } from '../../helpers/redis.ts'
import { run } from './run.ts'

const required = {
  UPSTREAM_BASE_URL: 'https://profiles.example/gw/v1',
  AUTH_URL: 'https://id.example',
  CLIENT_ID: 'id',
  CLIENT_SECRET: 'secret'
}

t.test('defaults are the contract\'s', async (t) => {
  const config = loadConfig(required)
  t.match(config, {
    PORT: 3000,
    HOST: '127.0.0.1',
    AUTH_SCHEME: 'Bearer',
    TOKEN_DEFAULT_TTL_SECONDS: 3600,
    CACHE_KEY_PREFIX: 'pbff:',
    CACHE_MEMORY_MB: 64,
    PROFILE_TTL_SECONDS: 300,
    TIMELINE_TTL_SECONDS: 60,
    STALE_TTL_SECONDS: 86400,
    NOT_FOUND_TTL_SECONDS: 60,
    UPSTREAM_TIMEOUT_MS: 5000,
    UPSTREAM_MAX_CONCURRENCY: 32,
    UPSTREAM_MAX_RPS: 0,
    UPSTREAM_EXPECTED_INSTANCES: 1,
    RATE_LIMIT_PER_MINUTE: 600,
    CORS_ORIGINS: '*',
    TRUST_PROXY: false,
    LOG_LEVEL: 'info'
  })
  t.equal(config.REDIS_URL, undefined)
  t.equal(config.ADMIN_TOKEN, undefined)
  t.equal(config.UPSTREAM_BURST, undefined, 'the budget then allows one second of UPSTREAM_MAX_RPS above it')
  t.equal(config.AUDIENCE, undefined, 'the token request then uses UPSTREAM_BASE_URL as given')
})

t.test('values are converted from their environment strings', async (t) => {
  const config = loadConfig({ ...required, PORT: '8080', TRUST_PROXY: 'true', AUTH_SCHEME: '', REDIS_URL: 'redis://127.0.0.1:6379/0' })
  t.equal(config.PORT, 8080)
  t.equal(config.TRUST_PROXY, true)
  t.equal(config.AUTH_SCHEME, '')
  for (const token of ['tok123', 'a-b.c_d~e+f/g==', 'dG9rZW4=']) t.equal(loadConfig({ ...required, ADMIN_TOKEN: token }).ADMIN_TOKEN, token)
  for (const scheme of ['Bearer', 'DPoP', 'token', 'X-Api.Key_1']) t.equal(loadConfig({ ...required, AUTH_SCHEME: scheme }).AUTH_SCHEME, scheme)
  t.equal(config.REDIS_URL, 'redis://127.0.0.1:6379/0')
  const budget = loadConfig({ ...required, UPSTREAM_MAX_RPS: '50', UPSTREAM_BURST: '10', UPSTREAM_EXPECTED_INSTANCES: '3' })
  t.match(budget, { UPSTREAM_MAX_RPS: 50, UPSTREAM_BURST: 10, UPSTREAM_EXPECTED_INSTANCES: 3 })
})

const sentinels = { ...required, REDIS_URL: 'redis://:data-secret@primary/2', REDIS_SENTINELS: 's1:26379,[::1]:26380', REDIS_SENTINEL_NAME: 'mymaster' }

t.test('Redis Sentinels: a list of host:port, the primary\'s name, their own password', async (t) => {
  t.match(loadConfig({ ...sentinels, REDIS_SENTINEL_PASSWORD: 'sentinel-secret' }), {
    REDIS_SENTINELS: 's1:26379,[::1]:26380', REDIS_SENTINEL_NAME: 'mymaster', REDIS_SENTINEL_PASSWORD: 'sentinel-secret', REDIS_CLUSTER: false
  })
  t.equal(loadConfig(required).REDIS_SENTINELS, undefined, 'unset: a single Redis (or a Cluster)')
  t.equal(loadConfig({ ...sentinels, REDIS_SENTINELS: 's1:1,s2:65535' }).REDIS_SENTINELS, 's1:1,s2:65535', 'ports 1 to 65535')
})

t.test('a Redis URL\'s credentials are its own (unlike a base URL\'s): kept', async (t) => {
  t.equal(loadConfig({ ...required, REDIS_URL: 'rediss://user:pass@redis.example:6380/1' }).REDIS_URL, 'rediss://user:pass@redis.example:6380/1')
  t.match(loadConfig({ ...required, UPSTREAM_BASE_URL: 'https://profiles.example/gw/v1/' }), { UPSTREAM_BASE_URL: 'https://profiles.example/gw/v1/' })
})

t.test('CORS_ORIGINS: * or origins as browsers send them; unset or empty is *', async (t) => {
  t.equal(loadConfig({ ...required, CORS_ORIGINS: '' }).CORS_ORIGINS, '*')
  for (const origins of ['*', 'https://app.example', 'https://a.example, http://localhost:3000,', 'http://[::1]:8080', 'chrome-extension://abcdefgh', '*,https://app.example']) {
    t.equal(loadConfig({ ...required, CORS_ORIGINS: origins }).CORS_ORIGINS, origins, origins)
  }
})

t.test('OTEL_*: tracing runs with a collector unless OTEL_SDK_DISABLED=true, and spans go where the OTLP exporter would send them', async (t) => {
  const traces = (env: Record<string, string>): string | undefined => tracesEndpoint(loadConfig({ ...required, ...env }))
  t.equal(traces({}), undefined, 'no collector: off')
  t.equal(traces({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }), 'http://collector:4318/v1/traces', 'the endpoint, with the signal\'s path')
  t.equal(traces({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/otlp/traces' }), 'http://collector:4318/otlp/traces', 'the traces endpoint, as it is')
  t.equal(traces({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:4318/v1/traces' }), 'http://b:4318/v1/traces', 'the traces endpoint first')
  for (const disabled of ['true', 'TRUE']) {
    t.equal(traces({ OTEL_SDK_DISABLED: disabled, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:4318/v1/traces' }), undefined, `OTEL_SDK_DISABLED=${disabled}: off`)
  }
  t.equal(traces({ OTEL_SDK_DISABLED: 'false', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318' }), 'http://a:4318/v1/traces')
  t.throws(() => loadConfig({ ...required, OTEL_SDK_DISABLED: 'yes' }), { message: /^OTEL_SDK_DISABLED must be true or false, got "yes"$/ })
  t.throws(() => loadConfig({ ...required, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'collector:4318' }), { message: /^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an absolute http\(s\) URL/ })
})

t.test('HOST: an IP address or a host name, as node:net listens on it', async (t) => {
  for (const host of ['0.0.0.0', '::', '::1', '127.0.0.1', 'localhost', 'bff_1', 'profile-bff.default.svc.cluster.local.']) {
    t.equal(loadConfig({ ...required, HOST: host }).HOST, host, host)
  }
})

t.test('a bad or missing value names the variable and what is wrong', async (t) => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ ...required, UPSTREAM_BASE_URL: 'nope' }, /^UPSTREAM_BASE_URL must be an absolute http\(s\) URL, got "nope"$/],
    [{ ...required, AUTH_URL: 'ftp://id.example' }, /^AUTH_URL must be an absolute http\(s\) URL/],
    // The calls carry only a base URL's origin and path: credentials, a query or a fragment would be dropped from them
    // (and sent to the identity provider as the default audience). Refused, and never repeated.
    ...['UPSTREAM_BASE_URL', 'AUTH_URL'].flatMap((name): Array<[Record<string, string>, RegExp]> => ([
      ['http://user:SECRET@profiles.example/gw', /"http:\/\/\*\*\*@profiles\.example\/gw"/],
      ['https://profiles.example/gw?api_key=SECRET', /"https:\/\/profiles\.example\/gw\?\*\*\*"/],
      ['https://profiles.example/gw#SECRET', /"https:\/\/profiles\.example\/gw#\*\*\*"/],
      ['https://profiles.example/gw?', /"https:\/\/profiles\.example\/gw\?\*\*\*"/]
    ] as const).map(([value, shown]) => [{ ...required, [name]: value },
      new RegExp(`^${name} must be an absolute http\\(s\\) URL without credentials, query or fragment \\(the calls carry only its origin and path\\), got ${shown.source}$`)])),
    [{ ...required, REDIS_URL: 'localhost:6379' }, /^REDIS_URL must be an absolute redis:\/\/ or rediss:\/\/ URL, with a database number or none/],
    // ioredis would send SELECT NaN once started, and the process would exit.
    [{ ...required, REDIS_URL: 'redis://redis:6379/cache' }, /^REDIS_URL must be .*, got "redis:\/\/redis:6379\/cache"$/],
    // A URL's credentials are never repeated, even where they make it unreadable (an unencoded `/` in the password).
    [{ ...required, REDIS_URL: 'redis://:pa/ss-SECRET@redis:6379' }, /^REDIS_URL must be .*, got "redis:\/\/\*\*\*@redis:6379"$/],
    [{ ...required, REDIS_URL: 'valkey://user:SECRET@redis:6379' }, /^REDIS_URL must be .*, got "valkey:\/\/\*\*\*@redis:6379"$/],
    // ioredis reads a query's password as an option: a query is never repeated either.
    [{ ...required, REDIS_URL: 'redis://redis:6379/cache?password=SECRET' }, /^REDIS_URL must be .*, got "redis:\/\/redis:6379\/cache\?\*\*\*"$/],
    [{ ...required, PROFILE_TTL_SECONDS: 'five' }, /^PROFILE_TTL_SECONDS must be an integer >= 1 and <= 2147483647, got "five"$/],
    // Written as a number, or refused: TypeBox's conversion alone would read these as 1, 1, 3000 and 16.
    ...['1e3', 'true', '3000.5', '0x10'].map((value): [Record<string, string>, RegExp] =>
      [{ ...required, PORT: value }, new RegExp(`^PORT must be an integer >= 0 and <= 65535, got "${value.replace('.', '\\.')}"$`)]),
    [{ ...required, STALE_TTL_SECONDS: '0.9' }, /^STALE_TTL_SECONDS must be an integer >= 0 and <= 2147483647, got "0\.9"$/],
    // Past Node's timers a deadline fires at once: every call would time out, a shutdown would not drain.
    [{ ...required, UPSTREAM_TIMEOUT_MS: '99999999999' }, /^UPSTREAM_TIMEOUT_MS must be an integer >= 1 and <= 600000, got 99999999999$/],
    [{ ...required, SHUTDOWN_DELAY_MS: '2147483648' }, /^SHUTDOWN_DELAY_MS must be an integer >= 0 and <= 3600000, got 2147483648$/],
    // A freshness of 0 would send every request upstream: the service's promises start at 1 s.
    ...['PROFILE_TTL_SECONDS', 'TIMELINE_TTL_SECONDS', 'NOT_FOUND_TTL_SECONDS'].map((name): [Record<string, string>, RegExp] =>
      [{ ...required, [name]: '0' }, new RegExp(`^${name} must be an integer >= 1 and <= 2147483647, got 0$`)]),
    [{ ...required, PORT: '70000' }, /^PORT must be an integer >= 0 and <= 65535/],
    // getaddrinfo would look these up as names, and start-up fail at listen with a stack.
    ...[' ', '[::1]', '1.2.3', 'host name', 'bff:3000'].map((value): [Record<string, string>, RegExp] =>
      [{ ...required, HOST: value }, new RegExp(`^HOST must be an IP address \\(an IPv6 one without brackets\\) or a host name, got ${JSON.stringify(value).replace(/[[\].]/g, '\\$&')}$`)]),
    // node:http refuses a control character in a header value, and a space makes another scheme: every call failed (502).
    ...['Bear\ner', 'Bearer ', 'Bé', 'Bearer:'].map((value): [Record<string, string>, RegExp] =>
      [{ ...required, AUTH_SCHEME: value }, new RegExp(`^AUTH_SCHEME must be empty or an HTTP token \\(letters, digits and !#\\$%&'\\*\\+-\\.\\^_\`\\|~: no space, no control character\\), got ${JSON.stringify(value).replace(/[\\]/g, '\\$&')}$`)]),
    // No request could ever match a token holding whitespace (as a secret made --from-file keeps its newline), nor
    // one a header cannot carry; the line says what is wrong, never the token.
    ...['tok123SECRET\n', 'tok123SECRET '].map((value): [Record<string, string>, RegExp] =>
      [{ ...required, ADMIN_TOKEN: value }, /^ADMIN_TOKEN must be a token68 \(letters, digits and -\._~\+\/, then = padding, as a Bearer header carries it\): this one ends with whitespace \(a secret made from a file, as by `kubectl create secret --from-file`, keeps its last newline\), got a value not repeated here \(a secret\)$/]),
    ...['tök123SECRET', 'tok 123SECRET', 'tok123SECRET=x'].map((value): [Record<string, string>, RegExp] =>
      [{ ...required, ADMIN_TOKEN: value }, /^ADMIN_TOKEN must be a token68 \(.*\): this one holds whitespace or another character, got a value not repeated here \(a secret\)$/]),
    // A browser's Origin is matched as written: these could never match one, nor does a list of blanks allow anything.
    ...([
      ['https://app.example/', 'entry 1 should be "https://app.example"'],
      ['https://a.example,https://APP.example', 'entry 2 should be "https://app.example"'],
      ['https://app.example:443', 'entry 1 should be "https://app.example"'],
      ['https://user:SECRET@app.example', 'entry 1 should be "https://app.example"'],
      ['app.example', 'entry 1 is not one'],
      ['null', 'entry 1 is not one'],
      [' , ', 'this one names none']
    ] as const).map(([value, problem]): [Record<string, string>, RegExp] => [{ ...required, CORS_ORIGINS: value }, new RegExp(
      '^CORS_ORIGINS must be \\* or comma-separated origins as browsers send them \\(scheme://host\\[:port\\]: lower-case, no path, no default port; ' +
      `${problem.replace(/[.]/g, '\\.')}\\), got "(?!.*SECRET)[^"]*"$`)]),
    [{ ...required, TRUST_PROXY: 'maybe' }, /^TRUST_PROXY must be true or false/],
    [{ ...required, LOG_LEVEL: 'loud' }, /^LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent/],
    [{ ...required, UPSTREAM_MAX_RPS: '-1' }, /^UPSTREAM_MAX_RPS must be an integer >= 0, got -1$/],
    [{ ...required, UPSTREAM_BURST: '0' }, /^UPSTREAM_BURST must be an integer >= 1, got 0$/],
    [{ ...required, UPSTREAM_EXPECTED_INSTANCES: 'three' }, /^UPSTREAM_EXPECTED_INSTANCES must be an integer >= 1, got "three"$/],
    [{ ...sentinels, REDIS_SENTINELS: 'sentinel-a,sentinel-b:26379' }, /^REDIS_SENTINELS must be a list host:port,host:port,..., got "sentinel-a,sentinel-b:26379"$/],
    // A port out of range left the instance degraded for good (ioredis can never connect).
    ...['127.0.0.1:99999', 's1:26379,s2:0', '[::1]:65536'].map((value): [Record<string, string>, RegExp] =>
      [{ ...sentinels, REDIS_SENTINELS: value }, new RegExp(`^REDIS_SENTINELS must be a list host:port,host:port,\\.\\.\\. with ports from 1 to 65535, got ${JSON.stringify(value).replace(/[[\].]/g, '\\$&')}$`)]),
    [{ ...sentinels, REDIS_SENTINEL_NAME: '' }, /^REDIS_SENTINEL_NAME is required with REDIS_SENTINELS/],
    [{ ...sentinels, REDIS_CLUSTER: 'true' }, /^REDIS_CLUSTER must be false with REDIS_SENTINELS/],
    [{ ...sentinels, REDIS_URL: '' }, /^REDIS_URL is required with REDIS_SENTINELS/],
    // Below 6 MiB the largest entry the upstream can fill would not fit (the store would take it and keep nothing).
    ...['0', '-1', '5', '64MB', 'lots'].map((value): [Record<string, string>, RegExp] =>
      [{ ...required, CACHE_MEMORY_MB: value }, new RegExp(`^CACHE_MEMORY_MB must be an integer >= 6, got "?${value.replace('.', '\\.')}"?$`)]),
    [{ ...required, CLIENT_ID: '' }, /^CLIENT_ID is required/],
    [{ AUTH_URL: 'https://id.example', CLIENT_ID: 'id', CLIENT_SECRET: 'x' }, /^UPSTREAM_BASE_URL is required/],
    [{ UPSTREAM_BASE_URL: 'nope', PORT: 'x' }, /^PORT must be an integer.*; UPSTREAM_BASE_URL must be .*; AUTH_URL is required.*; CLIENT_ID is required.*; CLIENT_SECRET is required/]
  ]
  for (const [env, message] of cases) t.throws(() => loadConfig(env), { name: 'ConfigError', message }, message.source)
})

t.test('every variable has a description (docs/reference.md and .env.example are built on them)', async (t) => {
  for (const [name, schema] of Object.entries(ConfigSchema.properties)) t.type(schema.description, 'string', name)
})

t.test('the server refuses to start on a bad value: one line on stderr, exit 1, nothing listening', async (t) => {
  const start = async (env: Record<string, string>) => await run(process.execPath, ['src/server.ts'], {
    env: { PATH: process.env.PATH, PORT: '0', ...env },
    timeout: 20_000
  })
  // `UPSTREAM_BASE_URL=nope npm start` with nothing else set as well: both servers start at once.
  const [bad, bare, memory] = await Promise.all([
    start({ ...required, UPSTREAM_BASE_URL: 'nope', CLIENT_SECRET: 'do-not-print-me' }),
    start({ UPSTREAM_BASE_URL: 'nope' }),
    start({ ...required, CACHE_MEMORY_MB: '5' })
  ])
  t.equal(bad.status, 1)
  t.equal(bad.stdout, '')
  t.equal(bad.stderr, 'profile-bff: configuration error: UPSTREAM_BASE_URL must be an absolute http(s) URL, got "nope"\n')
  t.equal(memory.status, 1)
  t.equal(memory.stderr, 'profile-bff: configuration error: CACHE_MEMORY_MB must be an integer >= 6, got 5\n')

  // With nothing else set: still one line, naming it first.
  t.equal(bare.status, 1)
  t.match(bare.stderr, /^profile-bff: configuration error: UPSTREAM_BASE_URL must be an absolute http\(s\) URL, got "nope"; AUTH_URL is required[^\n]*\n$/)
})

t.test('a HOST that does not resolve or a PORT in use: one line naming them, exit 1, no stack', async (t) => {
  const taken = createServer()
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
  t.teardown(() => taken.close())
  const { port } = taken.address() as AddressInfo
  const start = async (env: Record<string, string>) => await run(process.execPath, ['src/server.ts'], {
    env: { PATH: process.env.PATH, ...required, REDIS_URL, ...env },
    timeout: 30_000
  })
  const [unresolved, inUse] = await Promise.all([
    start({ HOST: 'example.invalid', PORT: '0' }),
    start({ HOST: '127.0.0.1', PORT: String(port) })
  ])
  t.equal(unresolved.status, 1)
  t.match(unresolved.stderr, /^profile-bff: cannot listen on HOST=example\.invalid PORT=0: HOST does not resolve to an address \((ENOTFOUND|EAI_AGAIN|EAI_FAIL|EAI_NONAME)\)\n$/)
  t.equal(inUse.status, 1)
  t.equal(inUse.stderr, `profile-bff: cannot listen on HOST=127.0.0.1 PORT=${port}: PORT is already in use on HOST, by another process (EADDRINUSE)\n`)
  for (const { stdout } of [unresolved, inUse]) t.notMatch(stdout, /unexpected error/, 'not logged as an unexpected error, with its stack')
})

t.test('Sentinels without the primary\'s name: the server refuses to start, one line naming the variable, no secret', async (t) => {
  const refused = await run(process.execPath, ['src/server.ts'], {
    env: { PATH: process.env.PATH, PORT: '0', ...required, REDIS_URL: 'redis://:data-secret@primary', REDIS_SENTINELS: 's1:26379', REDIS_SENTINEL_PASSWORD: 'sentinel-secret' },
    timeout: 20_000
  })
  t.equal(refused.status, 1)
  t.equal(refused.stderr, 'profile-bff: configuration error: REDIS_SENTINEL_NAME is required with REDIS_SENTINELS (the Sentinels\' name for the primary)\n')
})
