/** Request lines up to this many octets are accepted (RFC 9110, section 4.1, asks for at least 8,000). */
export const MAX_REQUEST_LINE_OCTETS = 8_000

/**
 * The octets of `<method> <target> HTTP/1.1`: node:http refuses a target that is not ASCII, so its
 * characters are its octets; the two spaces and the version make 10 more.
 */
export function requestLineOctets (method: string, target: string): number {
  return method.length + target.length + 10
}
