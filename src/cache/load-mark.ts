import type { PurgeMark } from './driver.ts'

/** Ends what this instance had heard of the key's purges in a load's mark (Redis's marks are UUIDs: redis-driver.ts). */
const HEARD_END = '|'

/**
 * A load's mark in this tier: Redis's, and the last purge this instance had heard or made when the load began. Redis
 * may lose its mark (a restart, an eviction) while the load runs; what was heard here still tells the fill is older.
 */
export function withHeard (mark: PurgeMark, heard: string): PurgeMark {
  return `${heard}${HEARD_END}${mark}`
}

export function split (loadMark: PurgeMark | undefined): { mark?: PurgeMark, heard?: string } {
  const end = loadMark?.indexOf(HEARD_END) ?? -1
  if (loadMark === undefined || end < 0) return { mark: loadMark }
  return { heard: loadMark.slice(0, end), mark: loadMark.slice(end + 1) }
}
