/** How much of what a caller sent an error message may repeat: enough to recognise it, never a payload. */
const ECHO_LIMIT = 40

/** The first ECHO_LIMIT code points of `input`, marked with `…` when cut. */
export function shortPrefix (input: string, limit = ECHO_LIMIT): string {
  const codePoints = [...input]
  return codePoints.length <= limit ? input : `${codePoints.slice(0, limit).join('')}…`
}

/** Whether every percent-escape in `url` decodes, to well-formed UTF-8: the query parser keeps one that does not as it is. */
export function hasWellFormedEscapes (url: string): boolean {
  try {
    decodeURIComponent(url)
    return true
  } catch {
    return false
  }
}
