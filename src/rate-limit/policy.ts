/** RATE_LIMIT_PER_MINUTE counts each client's requests over this window. */
export const RATE_LIMIT_WINDOW_MS = 60_000

/**
 * Clients counted at once without Redis (least recently seen first out past it). A count costs ~140 bytes
 * (IPv4; ~230 for IPv6, `node --expose-gc bench/rate-limit-memory.ts`): 100,000 clients take 14-23 MiB.
 */
export const STANDALONE_RATE_LIMIT_CLIENTS = 100_000
