import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { MAX_UPSTREAM_BODY_BYTES } from './resources.ts'
import { expectedOf } from './config-formats.ts'

/** The standard samplers of `OTEL_TRACES_SAMPLER` that need nothing beyond the SDK. */
const TRACE_SAMPLERS = [
  'always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'
] as const

/** The largest delta-seconds a cache honours (RFC 9111, section 1.2.2). */
const MAX_SECONDS = 2_147_483_647
/** Node's timers take at most this many ms (more runs them at once): the shutdown's two delays share it. */
const MAX_SHUTDOWN_MS = 3_600_000
/** A caller's whole wait; the deadlines derived from it (a load lasts up to twice it) stay within Node's timers. */
const MAX_UPSTREAM_TIMEOUT_MS = 600_000
/**
 * The least in-process store that holds the largest entry (src/cache/entry-bytes.ts counts it): each byte of the largest
 * body may read as one character above U+00FF (an invalid byte is U+FFFD), 2 bytes held and 3 in its encodings, so
 * 5 bytes an upstream byte, and a MiB for its key, tag and overhead.
 */
export const MIN_CACHE_MEMORY_MB = Math.ceil(5 * MAX_UPSTREAM_BODY_BYTES / (1024 * 1024)) + 1

const Seconds = (defaultValue: number, description: string, minimum = 0) =>
  Type.Integer({ minimum, maximum: MAX_SECONDS, default: defaultValue, description })

/** Variables whose values no message may repeat; a URL's credentials are cut from any (see `shown`). */
const SECRETS = new Set(['CLIENT_ID', 'CLIENT_SECRET', 'ADMIN_TOKEN', 'REDIS_SENTINEL_PASSWORD'])

/**
 * The service's whole configuration, named as the environment names it. This schema is the single
 * source of truth: the Config type, `.env.example`, the table of docs/reference.md and the compose file are checked
 * against it.
 */
export const ConfigSchema = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 3000, description: 'listen port' }),
  HOST: Type.String({ format: 'listen-host', default: '127.0.0.1', description: 'listen address (`0.0.0.0` in containers): an IP address (IPv6 without brackets) or a host name' }),
  UPSTREAM_BASE_URL: Type.String({ format: 'base-url', description: 'upstream base address (a path is kept)' }),
  AUTH_URL: Type.String({ format: 'base-url', description: 'identity provider; token at `{AUTH_URL}/oauth/token`' }),
  CLIENT_ID: Type.String({ minLength: 1, description: 'issued client id; never logged, never returned' }),
  CLIENT_SECRET: Type.String({ minLength: 1, description: 'issued client secret; never logged, never returned' }),
  AUDIENCE: Type.Optional(Type.String({ minLength: 1, description: '`audience` of the token request (default: `UPSTREAM_BASE_URL`)' })),
  AUTH_SCHEME: Type.String({ format: 'auth-scheme', default: 'Bearer', description: 'prefix of the Authorization value (empty: the bare token)' }),
  TOKEN_DEFAULT_TTL_SECONDS: Seconds(3600, 'token lifetime assumed when the answer has no `expires_in`', 1),
  REDIS_URL: Type.Optional(Type.String({ format: 'redis-url', description: 'e.g. `redis://127.0.0.1:6379/0`; unset: an in-process cache' })),
  REDIS_CLUSTER: Type.Boolean({ default: false, description: '`true`: `REDIS_URL` names one seed node of a Redis Cluster' }),
  REDIS_SENTINELS: Type.Optional(Type.String({ format: 'sentinels', description: '`host:port,host:port,...` of Redis Sentinels; with `REDIS_SENTINEL_NAME`, the primary they name is the Redis (credentials and TLS from `REDIS_URL`)' })),
  REDIS_SENTINEL_NAME: Type.Optional(Type.String({ minLength: 1, description: 'the Sentinels\' name for the primary (`mymaster` in Redis\'s own examples)' })),
  REDIS_SENTINEL_PASSWORD: Type.Optional(Type.String({ minLength: 1, description: 'the Sentinels\' own password, when they have one; never logged' })),
  CACHE_KEY_PREFIX: Type.String({ default: 'pbff:', description: 'prefix of every Redis key' }),
  CACHE_MEMORY_MB: Type.Integer({ minimum: MIN_CACHE_MEMORY_MB, default: 64, description: `the in-process store's bound (entries held without Redis, or while it is down), least recently used first; evictions of fresh entries are counted (at least ${MIN_CACHE_MEMORY_MB}: the largest entry the upstream can fill)` }),
  PROFILE_TTL_SECONDS: Seconds(300, 'a cached profile is fresh this long (at least 1: 0 would send every request upstream)', 1),
  TIMELINE_TTL_SECONDS: Seconds(60, 'a cached timeline is fresh this long (at least 1)', 1),
  STALE_TTL_SECONDS: Seconds(86400, 'after freshness ends, an entry may still be served while revalidating or when the upstream fails'),
  NOT_FOUND_TTL_SECONDS: Seconds(60, 'an upstream 404 is remembered this long (at least 1)', 1),
  UPSTREAM_TIMEOUT_MS: Type.Integer({ minimum: 1, maximum: MAX_UPSTREAM_TIMEOUT_MS, default: 5000, description: 'a caller\'s whole wait for the upstream (queue, token, request and body), from its request\'s arrival (at most 10 minutes)' }),
  UPSTREAM_MAX_CONCURRENCY: Type.Integer({ minimum: 1, default: 32, description: 'upstream requests in flight per instance' }),
  UPSTREAM_MAX_RPS: Type.Integer({ minimum: 0, default: 0, description: 'the deployment\'s calls per second to the upstream\'s data routes, shared by every instance on one Redis (0: unlimited)' }),
  UPSTREAM_BURST: Type.Optional(Type.Integer({ minimum: 1, description: 'calls above `UPSTREAM_MAX_RPS` allowed in a burst (default: `UPSTREAM_MAX_RPS`, one second of the rate)' })),
  UPSTREAM_EXPECTED_INSTANCES: Type.Integer({ minimum: 1, default: 1, description: 'while Redis is down (or before it was ever seen), each instance enforces `UPSTREAM_MAX_RPS` / the larger of this and the largest live count Redis answered in the last 3 s: the fleet\'s largest size' }),
  RATE_LIMIT_PER_MINUTE: Type.Integer({ minimum: 0, default: 600, description: 'per client address; `0` turns it off' }),
  CORS_ORIGINS: Type.String({ format: 'origins', default: '*', description: 'comma-separated allowed origins (`*`: any), each as browsers send it: `scheme://host[:port]`' }),
  TRUST_PROXY: Type.Boolean({ default: false, description: 'honour `X-Forwarded-For`' }),
  SHUTDOWN_DELAY_MS: Type.Integer({ minimum: 0, maximum: MAX_SHUTDOWN_MS, default: 5000, description: 'on SIGTERM/SIGINT, how long `/readyz` answers 503 while requests are still served, so a load balancer stops routing here before the listener closes (0: close at once)' }),
  SHUTDOWN_TIMEOUT_MS: Type.Integer({ minimum: 1, maximum: MAX_SHUTDOWN_MS, default: 10000, description: 'then, how long requests in flight may take to finish before the process exits anyway' }),
  LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((level) => Type.Literal(level)),
    { default: 'info', description: 'pino level' }
  ),
  ADMIN_TOKEN: Type.Optional(Type.String({ format: 'token68', description: 'bearer token for `POST /admin/purge/:username`; unset: no admin route' })),
  OTEL_SDK_DISABLED: Type.Boolean({ default: false, description: '`true`: no tracing, whatever else is set (the OpenTelemetry switch)' }),
  OTEL_EXPORTER_OTLP_ENDPOINT: Type.Optional(Type.String({ format: 'http-url', description: 'OTLP/HTTP collector; spans go to `{it}/v1/traces` (see docs/operations.md, "Tracing"); unset, with `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` unset too: no tracing, and no tracing code loaded' })),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: Type.Optional(Type.String({ format: 'http-url', description: 'the collector\'s traces URL, used as it is (ahead of `OTEL_EXPORTER_OTLP_ENDPOINT`); it turns tracing on as well' })),
  OTEL_SERVICE_NAME: Type.String({ minLength: 1, default: 'profile-bff', description: 'the traces\' `service.name`' }),
  OTEL_TRACES_SAMPLER: Type.Union(
    TRACE_SAMPLERS.map((sampler) => Type.Literal(sampler)),
    { default: 'parentbased_always_on', description: 'which requests are traced; `parentbased_*` follows a caller\'s `traceparent`' }
  ),
  OTEL_TRACES_SAMPLER_ARG: Type.Number({ minimum: 0, maximum: 1, default: 1, description: 'the ratio traced by the `*traceidratio` samplers (`0.01`: one request in a hundred)' }),
  OTEL_RESOURCE_ATTRIBUTES: Type.Optional(Type.String({ description: 'more resource attributes of the traces, `key=value,key=value` (e.g. `deployment.environment.name=prod`)' }))
})

export type Config = Static<typeof ConfigSchema>

/** Start-up refused: `message` is the one line an operator reads on stderr. */
export class ConfigError extends Error {
  override name = 'ConfigError'
}

/**
 * Reads the configuration from an environment. Empty strings count as unset (so `FOO=` in an env file
 * falls back to the default), except for AUTH_SCHEME where empty means "the bare token".
 */
export function loadConfig (env: Record<string, string | undefined>): Config {
  const raw: Record<string, unknown> = {}
  for (const key of Object.keys(ConfigSchema.properties)) {
    const value = env[key]
    if (value !== undefined && (value !== '' || key === 'AUTH_SCHEME')) raw[key] = value
  }
  // One line for all of them, in the schema's order, one problem per variable.
  const problems = new Map<string, string>()
  // TypeBox's conversion reads `1e3` as 1, `3000.5` as 3000 and `true` as 1: a number must be written as one.
  for (const [name, value] of Object.entries(raw)) {
    const schema = ConfigSchema.properties[name as keyof typeof ConfigSchema.properties] as TSchema
    const form = schema.type === 'integer' ? /^-?\d+$/ : schema.type === 'number' ? /^-?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i : undefined
    if (form !== undefined && !form.test(String(value).trim())) problems.set(name, describe(name, schema, raw))
  }
  const converted = Value.Convert(ConfigSchema, Value.Default(ConfigSchema, raw))
  for (const error of Value.Errors(ConfigSchema, converted)) {
    const name = error.path.replace(/^\//, '')
    if (!problems.has(name)) problems.set(name, describe(name, error.schema, raw))
  }
  for (const [name, problem] of sentinelProblems(converted as Partial<Config>)) if (!problems.has(name)) problems.set(name, problem)
  if (problems.size > 0) {
    const names = Object.keys(ConfigSchema.properties).filter((name) => problems.has(name))
    throw new ConfigError(names.map((name) => problems.get(name)).join('; '))
  }
  return converted as Config
}

/** What the schema alone cannot say: Sentinels need the primary's name, and are not a Cluster. */
function sentinelProblems (config: Partial<Config>): Array<[string, string]> {
  if (config.REDIS_SENTINELS === undefined) return []
  if (config.REDIS_URL === undefined) return [['REDIS_URL', 'REDIS_URL is required with REDIS_SENTINELS (its credentials, database and TLS are the primary\'s)']]
  if (config.REDIS_SENTINEL_NAME === undefined) return [['REDIS_SENTINEL_NAME', 'REDIS_SENTINEL_NAME is required with REDIS_SENTINELS (the Sentinels\' name for the primary)']]
  if (config.REDIS_CLUSTER === true) return [['REDIS_CLUSTER', 'REDIS_CLUSTER must be false with REDIS_SENTINELS (a Cluster fails over by itself)']]
  return []
}

function describe (name: string, schema: TSchema, raw: Record<string, unknown>): string {
  if (!(name in raw)) return `${name} is required (${String(schema.description)})`
  const expected = (schema.format !== undefined ? expectedOf(String(schema.format), raw[name]) : undefined) ?? expectation(schema)
  return `${name} must be ${expected}, got ${shown(name, raw[name])}`
}

/** A value as a message may repeat it: never a secret's, nor a URL's credentials (all before its last `@`) or query. */
function shown (name: string, value: unknown): string {
  if (SECRETS.has(name)) return 'a value not repeated here (a secret)'
  if (typeof value !== 'string') return JSON.stringify(value)
  const withoutCredentials = value.replace(/^([a-z][a-z\d+.-]*:\/\/)?.*@/is, (_all, scheme: string | undefined) => `${scheme ?? ''}***@`)
  // ioredis reads `?password=` as an option, and an http(s) URL's query may carry a key.
  return JSON.stringify(withoutCredentials.replace(/[?#].*$/s, (rest) => `${rest[0] ?? ''}***`))
}

function expectation (schema: TSchema): string {
  if (schema.type === 'integer') {
    const bounds = [schema.minimum !== undefined ? `>= ${schema.minimum}` : '', schema.maximum !== undefined ? `<= ${schema.maximum}` : '']
    return `an integer ${bounds.filter(Boolean).join(' and ')}`.trim()
  }
  if (schema.type === 'number') return `a number from ${schema.minimum} to ${schema.maximum}`
  if (schema.type === 'boolean') return 'true or false'
  if (Array.isArray(schema.anyOf)) return `one of ${schema.anyOf.map((s: TSchema) => s.const).join(', ')}`
  return 'a non-empty string'
}
