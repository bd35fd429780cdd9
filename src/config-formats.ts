import { isIP } from 'node:net'
import { FormatRegistry } from '@sinclair/typebox'

// The string formats of the configuration schema (src/config.ts), each with what its start-up line says is expected.

interface Format {
  test: (value: string) => boolean
  /** Completes "NAME must be …, got …" (what the value given lacks, where that depends on it). */
  expected: string | ((value: string) => string)
}

/** A DNS name's label (letters, digits, `-`, `_` as in container names); the last one not all digits (`1.2.3` would be read as an address). */
const HOSTNAME = /^(?=.{1,253}\.?$)([a-z\d_]([a-z\d_-]{0,61}[a-z\d_])?\.)*(?!\d+\.?$)[a-z\d_]([a-z\d_-]{0,61}[a-z\d_])?\.?$/i

/** One Sentinel, `host:port` (the port its group). */
const SENTINEL = /^(?:\[[^\]]+\]|[^,:\s[\]]+):(\d{1,5})$/

/** The port of each Sentinel of a `host:port,...` list; undefined for an entry of another shape. */
function sentinelPorts (value: string): Array<number | undefined> {
  return value.split(',').map((entry) => {
    const port = SENTINEL.exec(entry)?.[1]
    return port === undefined ? undefined : Number(port)
  })
}

/** The entries of a comma-separated list, blanks dropped. */
const listed = (value: string): string[] => value.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '')

/** `*`, or an origin as a browser serialises it (RFC 6454): a special scheme's as URL does, another's in lower case. */
function isOrigin (entry: string): boolean {
  if (entry === '*') return true
  if (!URL.canParse(entry)) return false
  const { origin } = new URL(entry)
  return origin === 'null' ? /^[a-z][a-z\d+.-]*:\/\/[a-z\d-]+(\.[a-z\d-]+)*(:[1-9]\d{0,4})?$/.test(entry) : origin === entry
}

/** Which entry of a list of origins is not one, and how to write it where that can be told (never the entry itself: it may hold credentials). */
function originProblem (value: string): string {
  const entries = listed(value)
  const index = entries.findIndex((entry) => !isOrigin(entry))
  const entry = entries[index]
  if (entry === undefined) return 'this one names none'
  const origin = URL.canParse(entry) ? new URL(entry).origin : 'null'
  return `entry ${index + 1} ${origin === 'null' ? 'is not one' : `should be "${origin}"`}`
}

const FORMATS: Record<string, Format> = {
  // A path is allowed and kept (the contract's `https://host/gw/v1`).
  'http-url': {
    test: (value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol),
    expected: 'an absolute http(s) URL'
  },
  // The upstream's and the identity provider's: their calls carry only the origin and the path, and the exact string is
  // the default `audience`; credentials, a query or a fragment would be dropped from the calls, and sent as the audience.
  'base-url': {
    test: (value) => FORMATS['http-url']?.test(value) === true && !/[?#]/.test(value) && new URL(value).username === '' && new URL(value).password === '',
    expected: (value) => FORMATS['http-url']?.test(value) === true
      ? 'an absolute http(s) URL without credentials, query or fragment (the calls carry only its origin and path)'
      : 'an absolute http(s) URL'
  },
  // ioredis would send `SELECT NaN` after start-up for another path, and fail there.
  'redis-url': {
    test: (value) => URL.canParse(value) && /^rediss?:$/.test(new URL(value).protocol) && /^(\/\d*)?$/.test(new URL(value).pathname),
    expected: 'an absolute redis:// or rediss:// URL, with a database number or none'
  },
  // `host:port,host:port,...` (a host may be a bracketed IPv6 address); a port past 65535 or 0 left the instance degraded for good.
  sentinels: {
    test: (value) => sentinelPorts(value).every((port) => port !== undefined && port >= 1 && port <= 65535),
    expected: (value) => sentinelPorts(value).includes(undefined)
      ? 'a list host:port,host:port,...'
      : 'a list host:port,host:port,... with ports from 1 to 65535'
  },
  // The Authorization value's scheme (RFC 9110, section 11.4), or nothing before the bare token: node:http refuses a
  // header value with a control character, and a space or another separator makes another value; each call failed so.
  'auth-scheme': {
    test: (value) => /^[!#$%&'*+.^_`|~\dA-Za-z-]*$/.test(value),
    expected: 'empty or an HTTP token (letters, digits and !#$%&\'*+-.^_`|~: no space, no control character)'
  },
  // A bearer token as `Authorization: Bearer <it>` carries it (RFC 7235's token68): another could never match a request.
  token68: {
    test: (value) => /^[A-Za-z\d\-._~+/]+=*$/.test(value),
    expected: (value) => `a token68 (letters, digits and -._~+/, then = padding, as a Bearer header carries it): ${/\s$/.test(value)
      ? 'this one ends with whitespace (a secret made from a file, as by `kubectl create secret --from-file`, keeps its last newline)'
      : 'this one holds whitespace or another character'}`
  },
  // A browser's `Origin` is matched as written: `https://app.example/`, `https://APP.example`, `https://app.example:443`
  // or `app.example` never matches, nor does a list of blanks allow anything.
  origins: {
    test: (value) => listed(value).length > 0 && listed(value).every(isOrigin),
    expected: (value) => `* or comma-separated origins as browsers send them (scheme://host[:port]: lower-case, no path, no default port; ${originProblem(value)})`
  },
  // What node:net listens on: an address (`[::1]` is a URL's spelling, which getaddrinfo looks up as a name), or a name to resolve.
  'listen-host': {
    test: (value) => isIP(value) !== 0 || HOSTNAME.test(value),
    expected: 'an IP address (an IPv6 one without brackets) or a host name'
  }
}

for (const [name, { test }] of Object.entries(FORMATS)) FormatRegistry.Set(name, test)

/** What a value of `format` must be, as the start-up line words it for `value`. */
export function expectedOf (format: string, value: unknown): string | undefined {
  const expected = FORMATS[format]?.expected
  return typeof expected === 'function' ? expected(String(value)) : expected
}
