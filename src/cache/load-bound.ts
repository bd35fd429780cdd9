/** How long one load may last: a token exchange and an upstream call, each bounded by the upstream timeout, and a margin. */
export function loadBoundMs (upstreamTimeoutMs: number): number {
  return 2 * upstreamTimeoutMs + 1_000
}

/** A purge is remembered as long as a load that started before it may still be storing. */
export function purgeMemoryMs (upstreamTimeoutMs: number): number {
  return 2 * loadBoundMs(upstreamTimeoutMs)
}
