/** RATE_LIMIT_PER_MINUTE counts each client's requests over this window. */
export const RATE_LIMIT_WINDOW_MS = 60_000

/**
 * Clients counted at once without Redis (least recently seen first out past it). A count costs ~200 bytes
 * (IPv4; ~290 for IPv6, measured on 100,000 keys): 100,000 clients in one minute take 20-29 MiB.
 */
export const STANDALONE_RATE_LIMIT_CLIENTS = 100_000
