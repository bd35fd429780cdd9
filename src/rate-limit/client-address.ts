import { isIPv6 } from 'node:net'

/**
 * The key a client's requests are counted under: an IPv4 address as it is (written IPv4-mapped in IPv6 too, as a
 * dual-stack socket reports it), an IPv6 address by its /64, the block one subscriber usually holds.
 */
export function clientAddress (ip: string): string {
  if (!isIPv6(ip)) return ip
  const groups = ipv6Groups(ip)
  const [, , , , , mapped = 0, high = 0, low = 0] = groups
  if (mapped === 0xffff && groups.slice(0, 5).every((group) => group === 0)) return [high >> 8, high & 0xff, low >> 8, low & 0xff].join('.')
  return `${groups.slice(0, 4).map((group) => group.toString(16)).join(':')}::/64`
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, a trailing IPv4 part read as two groups, a zone dropped). */
function ipv6Groups (ip: string): number[] {
  const [address = ''] = ip.split('%')
  const [head = '', tail] = address.split('::')
  const read = (part: string): number[] => part === ''
    ? []
    : part.split(':').flatMap((piece) => {
      if (!piece.includes('.')) return [parseInt(piece, 16)]
      const [a = 0, b = 0, c = 0, d = 0] = piece.split('.').map(Number)
      return [(a << 8) | b, (c << 8) | d]
    })
  const first = read(head)
  const last = tail === undefined ? [] : read(tail)
  return [...first, ...Array<number>(8 - first.length - last.length).fill(0), ...last]
}
