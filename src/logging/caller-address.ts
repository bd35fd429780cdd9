import { isIP } from 'node:net'

/** What the caller's address is read from: Fastify's request (`ips`, nearest first, only with TRUST_PROXY). */
export interface AddressedRequest {
  ip: string | undefined
  ips?: string[]
  socket?: { remoteAddress?: string | undefined } | null
}

/**
 * The caller's address, for its rate-limit key and its log line. With TRUST_PROXY, `request.ip` is X-Forwarded-For's
 * leftmost entry, which the client writes: any string (12 KB of it, a new one a request, crashed a 128 MB heap in an
 * audit) would key the counts and fill the log. So an entry is an address or nothing, a port or a zone dropped (some
 * gateways write `ip:port`); when the leftmost is none, the nearest proxy's entry stands in, then the connection's.
 */
export function callerAddress (request: AddressedRequest): string {
  // Without TRUST_PROXY (Fastify then defines no `ips`), the connection's address is an address, or none once it is gone.
  if (!('ips' in request)) return request.ip ?? ''
  const leftmost = bareAddress(request.ip)
  if (leftmost !== undefined) return leftmost
  // Only the nearest proxy's entry: those further left are the client's to write too, and each costs a parse.
  return bareAddress(request.ips?.[1]) ?? bareAddress(request.socket?.remoteAddress) ?? ''
}

/**
 * `value` as an address: as it is, or without the port (`a.b.c.d:443`, `[v6]:443`) or zone (`%eth0`) a proxy may add.
 * Fastify's `request.ip` is undefined once the connection is gone (a probe that closed before its line is written).
 */
export function bareAddress (value: string | undefined): string | undefined {
  if (value === undefined) return undefined
  if (isIP(value) !== 0 && !value.includes('%')) return value
  const bracketed = /^\[([^\]]*)\](?::\d{1,5})?$/.exec(value)?.[1]
  const withPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(value)?.[1]
  const [address = ''] = (bracketed ?? withPort ?? value).split('%')
  return isIP(address) !== 0 ? address : undefined
}
