/**
 * The malformed-request corpus of issue 24: ~140 templates, each a raw HTTP/1.1 request built from a
 * variant (path, username, header values, sizes), expanded to `count` requests by cycling the templates.
 * Requests are latin1 strings (one character, one octet) so any byte can be written; `utf8()` spells
 * UTF-8 octets that way.
 */

interface Variant {
  /** Which repetition of its template this is (0, 1, ...): every other field follows from it. */
  k: number
  user: string
  /** One of the service's paths (or none), naming `user`. */
  path: string
  /** 1 to 9, for sizes and counts that vary. */
  n: number
}

export interface CorpusRequest {
  template: string
  /** The raw bytes, as latin1. */
  raw: string
  /** How many requests `raw` holds, each owed an answer (pipelined ones: more than 1). */
  requests: number
}

type Build = (v: Variant) => string
/** A template: its name, its request, and how many requests that holds when more than one. */
type Template = [string, Build] | [string, Build, number]

const USERS = ['alice', 'bob', 'carol', 'dave', 'erin', 'frank', 'grace', 'heidi', 'ghost-404', 'mallory', 'o.neil', 'x_9']
const PATHS = ['/profile/U', '/profile/U/timeline', '/user/U?query=name', '/user/U?query=Credits', '/profiles?username=U',
  '/healthz', '/readyz', '/metrics', '/docs/json', '/admin/purge/U', '/nope/U']
const CRLF = '\r\n'
const ADMIN = 'Authorization: Bearer malformed-bench-admin-token'

const utf8 = (text: string): string => Buffer.from(text, 'utf8').toString('latin1')
const host = (v: Variant): string => `Host: 127.0.0.1:${3000 + v.n}`
const common = (v: Variant): string[] => [host(v), `User-Agent: malformed-corpus/${v.k}`, 'Accept: application/json']
/** A request line and headers (the blank line included), then `body`. */
const req = (line: string, headers: string[], body = ''): string => [line, ...headers].join(CRLF) + CRLF + CRLF + body
const get = (v: Variant, extra: string[] = [], path = v.path): string => req(`GET ${path} HTTP/1.1`, [...common(v), ...extra])
const post = (v: Variant, extra: string[], body = '', path = `/admin/purge/${v.user}`): string =>
  req(`POST ${path} HTTP/1.1`, [...common(v), ADMIN, ...extra], body)
const repeat = (text: string, octets: number): string => text.repeat(Math.ceil(octets / text.length)).slice(0, octets)
const name = (octets: number, v: Variant): string => repeat(v.user + '-', octets)
const chunked = (v: Variant, chunks: string): string => post(v, ['Content-Type: application/json', 'Transfer-Encoding: chunked'], chunks)
const json = (v: Variant): string => `{"reason":"corpus ${v.k}"}`
const sized = (v: Variant, body: string, extra: string[] = [], type = 'Content-Type: application/json'): string =>
  post(v, [type, `Content-Length: ${body.length}`, ...extra].filter(Boolean), body)

const requestLines: Array<[string, Build]> = [
  ['line: missing version', (v) => req(`GET ${v.path}`, common(v))],
  ['line: HTTP/0.9 style, alone', (v) => `GET ${v.path}${CRLF}`],
  ['line: HTTP/1.0 without Host', (v) => req(`GET ${v.path} HTTP/1.0`, ['Accept: application/json'])],
  ['line: HTTP/1.0 keep-alive', (v) => req(`GET ${v.path} HTTP/1.0`, [...common(v), 'Connection: keep-alive'])],
  ['line: HTTP/9.9', (v) => req(`GET ${v.path} HTTP/9.9`, common(v))],
  ['line: HTTP/1.2', (v) => req(`GET ${v.path} HTTP/1.2`, common(v))],
  ['line: HTTP/2 preface', () => `PRI * HTTP/2.0${CRLF}${CRLF}SM${CRLF}${CRLF}`],
  ['line: lowercase version', (v) => req(`GET ${v.path} http/1.1`, common(v))],
  ['line: version HTTP/1.1.1', (v) => req(`GET ${v.path} HTTP/1.1.1`, common(v))],
  ['line: two spaces before target', (v) => req(`GET  ${v.path} HTTP/1.1`, common(v))],
  ['line: two spaces before version', (v) => req(`GET ${v.path}  HTTP/1.1`, common(v))],
  ['line: trailing space', (v) => req(`GET ${v.path} HTTP/1.1 `, common(v))],
  ['line: leading space', (v) => req(` GET ${v.path} HTTP/1.1`, common(v))],
  ['line: tabs as separators', (v) => req(`GET\t${v.path}\tHTTP/1.1`, common(v))],
  ['line: space inside target', (v) => req(`GET /profile/${v.user} x HTTP/1.1`, common(v))],
  ['line: garbage text', (v) => req(`hello ${v.user}, how are you?`, common(v))],
  ['line: garbage bytes', (v) => Array.from({ length: 40 + v.n * 10 }, (_, i) => String.fromCharCode((i * 37 + v.k * 11) % 256)).join('') + CRLF + CRLF],
  ['line: LF line endings', (v) => [`GET ${v.path} HTTP/1.1`, ...common(v)].join('\n') + '\n\n'],
  ['line: CR line endings', (v) => [`GET ${v.path} HTTP/1.1`, ...common(v)].join('\r') + '\r\r'],
  ['line: absolute-form', (v) => req(`GET http://127.0.0.1${v.path} HTTP/1.1`, common(v))],
  ['line: absolute-form, other host', (v) => req(`GET http://evil.example:${80 + v.n}${v.path} HTTP/1.1`, common(v))],
  ['line: absolute-form https', (v) => req(`GET https://127.0.0.1/profile/${v.user} HTTP/1.1`, common(v))],
  ['line: asterisk-form GET', (v) => req('GET * HTTP/1.1', common(v))],
  ['line: target without slash', (v) => req(`GET profile/${v.user} HTTP/1.1`, common(v))],
  ['line: raw UTF-8 in target', (v) => req(`GET /profile/${utf8('ålîçé' + v.user)} HTTP/1.1`, common(v))],
  ['line: raw octet 0xFF in target', (v) => req(`GET /profile/${v.user}\xff HTTP/1.1`, common(v))],
  ['line: dot segments', (v) => req(`GET /profile/../admin/purge/${v.user} HTTP/1.1`, common(v))]
]

const methods: Array<[string, Build]> = [
  ['method: lowercase get', (v) => req(`get ${v.path} HTTP/1.1`, common(v))],
  ['method: lowercase post', (v) => req(`post /admin/purge/${v.user} HTTP/1.1`, [...common(v), 'Content-Length: 0'])],
  ['method: unknown FOO', (v) => req(`FOO ${v.path} HTTP/1.1`, common(v))],
  ['method: very long', (v) => req(`${'GETX'.repeat(20 * v.n)} ${v.path} HTTP/1.1`, common(v))],
  ['method: PURGE (known to the parser)', (v) => req(`PURGE /profile/${v.user} HTTP/1.1`, common(v))],
  ['method: DELETE', (v) => req(`DELETE /profile/${v.user} HTTP/1.1`, common(v))],
  ['method: PUT with body', (v) => req(`PUT /profile/${v.user} HTTP/1.1`, [...common(v), 'Content-Type: application/json', `Content-Length: ${json(v).length}`], json(v))],
  ['method: CONNECT authority-form', (v) => req(`CONNECT 127.0.0.1:${440 + v.n} HTTP/1.1`, [`Host: 127.0.0.1:${440 + v.n}`])],
  ['method: CONNECT to a name', (v) => req(`CONNECT ${v.user}.example:443 HTTP/1.1`, [`Host: ${v.user}.example:443`, 'Proxy-Connection: keep-alive'])],
  ['method: CONNECT origin-form', (v) => req(`CONNECT /profile/${v.user} HTTP/1.1`, common(v))],
  ['method: TRACE', (v) => req(`TRACE ${v.path} HTTP/1.1`, [...common(v), 'Cookie: secret=1'])],
  ['method: OPTIONS without preflight', (v) => req(`OPTIONS ${v.path} HTTP/1.1`, common(v))],
  ['method: OPTIONS, Origin only', (v) => req(`OPTIONS /profile/${v.user} HTTP/1.1`, [...common(v), 'Origin: https://app.example'])],
  ['method: OPTIONS preflight', (v) => req(`OPTIONS /profile/${v.user} HTTP/1.1`, [...common(v), 'Origin: https://app.example', 'Access-Control-Request-Method: GET'])],
  ['method: HEAD', (v) => req(`HEAD ${v.path} HTTP/1.1`, common(v))],
  ['method: GET with a body', (v) => req(`GET /profile/${v.user} HTTP/1.1`, [...common(v), `Content-Length: ${json(v).length}`], json(v))]
]

const pathOctets: Array<[string, Build]> = ['\x00', '\x01', '\x1b', '\x7f'].map((c) =>
  [`path: control 0x${c.charCodeAt(0).toString(16).padStart(2, '0')}`, (v: Variant) => req(`GET /profile/${v.user}${c}x HTTP/1.1`, common(v))])

const encodings: Array<[string, Build]> = [
  ['encoding: %ZZ', () => req('GET /profile/%ZZ HTTP/1.1', ['Host: 127.0.0.1'])],
  ['encoding: %ZZ in a name', (v) => get(v, [], `/profile/${v.user}%ZZ/timeline`)],
  ['encoding: lone %', (v) => get(v, [], `/profile/${v.user}%`)],
  ['encoding: %G1', (v) => get(v, [], `/user/%G1${v.user}?query=name`)],
  ['encoding: overlong UTF-8 %C0%AF', (v) => get(v, [], `/profile/${v.user}%C0%AF`)],
  ['encoding: invalid UTF-8 %FF', (v) => get(v, [], `/profile/%FF${v.user}`)],
  ['encoding: truncated UTF-8', (v) => get(v, [], `/profile/${v.user}%E2%82`)],
  ['encoding: %00 in a name', (v) => get(v, [], `/profile/${v.user}%00`)],
  ['encoding: control %01 %7F %0A', (v) => get(v, [], `/profile/${v.user}%0${v.n % 2 === 0 ? 'A' : '1'}%7F`)],
  ['encoding: encoded slash', (v) => get(v, [], `/profile/${v.user}%2Fadmin`)],
  ['encoding: %ZZ in a query', (v) => get(v, [], `/user/${v.user}?query=%ZZ`)],
  ['encoding: %ZZ in a batch', (v) => get(v, [], `/profiles?username=${v.user}&username=%ZZ`)],
  ['encoding: %ZZ with HEAD', (v) => req(`HEAD /profile/%ZZ${v.user} HTTP/1.1`, common(v))]
]

const headers: Array<[string, Build]> = [
  ['header: no colon', (v) => get(v, [`X-No-Colon ${v.user}`])],
  ['header: space before colon', (v) => get(v, [`X-Space : ${v.user}`])],
  ['header: space in name', (v) => get(v, [`X Foo: ${v.user}`])],
  ['header: bad name octet', (v) => get(v, [`X-Fo(o)-${v.n}: bar`])],
  ['header: obs-fold space', (v) => get(v, [`X-Folded: first-${v.k}`, ' second'])],
  ['header: obs-fold tab', (v) => get(v, ['X-Folded: first', `\tsecond-${v.k}`])],
  ['header: bare CR in value', (v) => get(v, [`X-Cr: a\rb-${v.k}`])],
  ['header: bare LF in value', (v) => get(v, [`X-Lf: a\nb-${v.k}`])],
  ['header: over 16 KB, one value', (v) => get(v, [`X-Big: ${repeat(v.user, 16_500 + 3_000 * v.n)}`])],
  ['header: over 16 KB, many', (v) => get(v, Array.from({ length: 40 + v.n }, (_, i) => `X-Pad-${i}: ${repeat('p', 400)}`))],
  ['header: 3,000 headers', (v) => get(v, Array.from({ length: 3_000 }, (_, i) => `X-H${i}: ${v.n}`))],
  ['header: missing Host', (v) => req(`GET ${v.path} HTTP/1.1`, ['Accept: application/json'])],
  ['header: missing Host on POST', (v) => req(`POST /admin/purge/${v.user} HTTP/1.1`, [ADMIN, 'Content-Length: 0'])],
  ['header: two Hosts', (v) => get(v, [`Host: other-${v.n}.example`])],
  ['header: Host with a space', (v) => req(`GET ${v.path} HTTP/1.1`, [`Host: a b${v.n}`])],
  ['header: UTF-8 in a value', (v) => get(v, [utf8(`X-Name: ${v.user} — ✓ ünïcode`)])],
  ['header: Origin garbage', (v) => get(v, [`Origin: not a url ${v.k}`])],
  ['header: X-Request-Id garbage', (v) => get(v, [`X-Request-Id: <script>${v.k}</script> ${repeat('r', 300 * v.n)}`])],
  ['header: Authorization garbage', (v) => req(`POST /admin/purge/${v.user} HTTP/1.1`, [...common(v), `Authorization: Bearer ${repeat('\x80\xfe', 20 * v.n)}`, 'Content-Length: 0'])],
  ['header: Authorization without scheme', (v) => req(`POST /admin/purge/${v.user} HTTP/1.1`, [...common(v), 'Authorization: malformed-bench-admin-token', 'Content-Length: 0'])],
  ['header: Upgrade websocket', (v) => get(v, ['Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', `Sec-WebSocket-Key: ${v.user}`])],
  ['header: Connection odd', (v) => get(v, [`Connection: close, keep-alive, x-${v.user}`])]
]

const headerValueOctets: Array<[string, Build]> = ['\x00', '\x01', '\x1b', '\x7f'].map((c) =>
  [`header: control 0x${c.charCodeAt(0).toString(16).padStart(2, '0')} in a value`, (v: Variant) => get(v, [`X-Ctl: ${v.user}${c}x`])])

const framing: Template[] = [
  ['body: Content-Length and Transfer-Encoding', (v) => post(v, [`Content-Length: ${json(v).length}`, 'Transfer-Encoding: chunked'], json(v))],
  ['body: Transfer-Encoding then Content-Length', (v) => post(v, ['Transfer-Encoding: chunked', 'Content-Length: 5'], `5${CRLF}hello${CRLF}0${CRLF}${CRLF}`)],
  ['body: CL.TE smuggling', (v) => post(v, ['Content-Length: 6', 'Transfer-Encoding: chunked'], `0${CRLF}${CRLF}G`)],
  ['body: duplicate Content-Length, equal', (v) => post(v, ['Content-Length: 2', 'Content-Length: 2'], '{}')],
  ['body: duplicate Content-Length, different', (v) => post(v, ['Content-Length: 2', `Content-Length: ${2 + v.n}`], '{}')],
  ['body: Content-Length list', (v) => post(v, ['Content-Length: 2, 2'], '{}')],
  ['body: negative Content-Length', (v) => post(v, [`Content-Length: -${v.n}`], '{}')],
  ['body: non-numeric Content-Length', (v) => post(v, [`Content-Length: ${v.user}`], '{}')],
  ['body: hex Content-Length', (v) => post(v, [`Content-Length: 0x${v.n}`], '{}')],
  ['body: Content-Length empty', (v) => post(v, ['Content-Length:'], '{}')],
  ['body: Content-Length enormous', (v) => post(v, [`Content-Length: ${'9'.repeat(20 + v.n)}`], '{}')],
  ['body: longer than Content-Length', (v) => post(v, ['Content-Type: application/json', 'Content-Length: 2'], `{}GARBAGE ${v.user}${CRLF}${CRLF}`), 2],
  ['body: Transfer-Encoding gzip only', (v) => post(v, ['Transfer-Encoding: gzip'], '{}')],
  ['body: Transfer-Encoding xchunked', (v) => post(v, ['Transfer-Encoding: xchunked'], `0${CRLF}${CRLF}`)],
  ['body: Transfer-Encoding on HTTP/1.0', (v) => req(`POST /admin/purge/${v.user} HTTP/1.0`, [ADMIN, 'Transfer-Encoding: chunked'], `2${CRLF}{}${CRLF}0${CRLF}${CRLF}`)],
  ['body: Transfer-Encoding on GET', (v) => get(v, ['Transfer-Encoding: chunked'], `/profile/${v.user}`) + `0${CRLF}${CRLF}`],
  ['chunk: size not hex', (v) => chunked(v, `zz${CRLF}${json(v)}${CRLF}0${CRLF}${CRLF}`)],
  ['chunk: negative size', (v) => chunked(v, `-${v.n}${CRLF}{}${CRLF}0${CRLF}${CRLF}`)],
  ['chunk: size overflows', (v) => chunked(v, `${'f'.repeat(17 + v.n)}${CRLF}{}${CRLF}0${CRLF}${CRLF}`)],
  ['chunk: data longer than size', (v) => chunked(v, `1${CRLF}{}${CRLF}0${CRLF}${CRLF}`)],
  ['chunk: no CRLF after data', (v) => chunked(v, `2${CRLF}{}0${CRLF}${CRLF}`)],
  ['chunk: extension', (v) => chunked(v, `2;name=${v.user}${CRLF}{}${CRLF}0${CRLF}${CRLF}`)],
  ['chunk: control octet in an extension', (v) => chunked(v, `2;a=\x01${CRLF}{}${CRLF}0${CRLF}${CRLF}`)],
  ['chunk: extensions over 16 KB', (v) => chunked(v, `2;${repeat('e=1;', 17_000 + 1_000 * v.n)}${CRLF}{}${CRLF}0${CRLF}${CRLF}`)],
  ['chunk: bad trailer', (v) => chunked(v, `2${CRLF}{}${CRLF}0${CRLF}X-Trailer ${v.user}${CRLF}${CRLF}`)],
  ['body: 2 MB POST', (v) => sized(v, `{"pad":"${repeat('x', 2 * 1024 * 1024 + v.n)}"}`)],
  ['body: 2 MB chunked POST', (v) => chunked(v, `200000${CRLF}${repeat('y', 0x200000)}${CRLF}0${CRLF}${CRLF}`)],
  ['body: 2 MB announced, 1 KB sent', (v) => post(v, ['Content-Type: application/json', `Content-Length: ${2 * 1024 * 1024}`], repeat('z', 1024))],
  ['body: invalid JSON', (v) => sized(v, `{"reason": ${v.user}`)],
  ['body: odd Content-Type', (v) => sized(v, `<purge user="${v.user}"/>`, [], 'Content-Type: application/xml')],
  ['body: no Content-Type', (v) => sized(v, json(v), [], '')],
  ['expect: 200-ok', (v) => get(v, ['Expect: 200-ok'])],
  ['expect: empty', (v) => get(v, ['Expect:'], `/profile/${v.user}`)],
  ['expect: garbage on POST', (v) => sized(v, json(v), [`Expect: ${v.user}`])],
  ['expect: 100-continue with the body', (v) => sized(v, json(v), ['Expect: 100-continue'])],
  ['expect: 100-continue on GET', (v) => get(v, ['Expect: 100-continue'], `/profile/${v.user}`)]
]

const stalls: Array<[string, Build]> = [
  ['stall: mid request line', (v) => `GET /profile/${v.user.slice(0, 3)}`],
  ['stall: mid headers', (v) => `GET ${v.path} HTTP/1.1${CRLF}${host(v)}${CRLF}X-Pad: ${repeat('s', 10 * v.n)}`],
  ['stall: before the blank line', (v) => `GET ${v.path} HTTP/1.1${CRLF}${common(v).join(CRLF)}${CRLF}`],
  ['stall: mid body', (v) => post(v, ['Content-Type: application/json', 'Content-Length: 100'], '{"reason":')],
  ['stall: mid chunked body', (v) => chunked(v, `a${CRLF}{"re`)]
]

const lengths: Array<[string, Build]> = [
  ['length: username 129 octets', (v) => get(v, [], `/profile/${name(129, v)}`)],
  ['length: username 1,537 octets', (v) => get(v, [], `/profile/${name(1_537, v)}`)],
  ['length: username 1,537 octets, timeline', (v) => get(v, [], `/profile/${name(1_537, v)}/timeline`)],
  ['length: username 7,975 octets (line 7,997)', (v) => get(v, [], `/profile/${name(7_975, v)}`)],
  ['length: username 8,001 octets', (v) => get(v, [], `/profile/${name(8_001, v)}`)],
  ['length: username 8,001 octets, HEAD', (v) => req(`HEAD /profile/${name(8_001, v)} HTTP/1.1`, common(v))],
  ['length: username 1,537 percent-encoded octets', (v) => get(v, [], `/profile/${repeat('%41', 1_537 * 3)}`)],
  ['length: query 9,000 octets', (v) => get(v, [], `/user/${v.user}?query=name&pad=${repeat('q', 9_000)}`)],
  ['length: target over 16 KB', (v) => get(v, [], `/profile/${name(17_000, v)}`)],
  ['length: 51 usernames in a batch', (v) => get(v, [], '/profiles?' + Array.from({ length: 51 }, (_, i) => `username=${v.user}${i}`).join('&'))],
  ['length: batch without username', (v) => get(v, [], `/profiles?fields=name&x=${v.k}`)],
  ['length: username . and ..', (v) => get(v, [], v.n % 2 === 0 ? '/profile/.' : '/profile/..')],
  ['length: empty username', (v) => get(v, [], v.n % 2 === 0 ? '/profile/' : '/user/?query=name')]
]

const pipelined: Template[] = [
  ['pipeline: good then garbage', (v) => get(v, [], `/profile/${v.user}`) + `GARBAGE ${v.k}${CRLF}${CRLF}`, 2],
  ['pipeline: good then no colon', (v) => get(v, [], '/healthz') + req(`GET /profile/${v.user} HTTP/1.1`, [host(v), 'Broken']), 2],
  ['pipeline: good then CONNECT', (v) => get(v, [], '/healthz') + req('CONNECT 127.0.0.1:443 HTTP/1.1', ['Host: 127.0.0.1:443']), 2]
]

export const TEMPLATES: readonly Template[] = [
  ...requestLines, ...methods, ...pathOctets, ...encodings, ...headers, ...headerValueOctets, ...framing, ...stalls,
  ...lengths, ...pipelined
]

/** `count` requests: template i % templates, each repetition with its own username, path and sizes. */
export function corpus (count: number): CorpusRequest[] {
  return Array.from({ length: count }, (_, i) => {
    const [template, build, requests = 1] = TEMPLATES[i % TEMPLATES.length] as Template
    const k = Math.floor(i / TEMPLATES.length)
    const user = (USERS[(i * 7) % USERS.length] ?? 'alice') + (k > 0 ? String(k) : '')
    const path = (PATHS[(i * 5 + k) % PATHS.length] ?? '/healthz').replace('U', user)
    return { template, raw: build({ k, user, path, n: 1 + ((i * 3 + k) % 9) }), requests }
  })
}
