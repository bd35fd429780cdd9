import type { CacheEntry } from './cache-entry.ts'

/**
 * What holding one entry costs beyond its strings' characters: the entry object, three string headers, the store's
 * map slot and bookkeeping (links, ttl, start, size), and the parsed profile a field query keeps beside it. Measured
 * with the simulator's profiles and timelines (`npx node --expose-gc --import tsx bench/store-entry-bytes.ts`):
 * 1,274 bytes of heap an entry, of which the characters counted below are 963.
 */
export const ENTRY_OVERHEAD_BYTES = 384

/** A string's characters as V8 keeps them: one byte each when all are Latin-1, two otherwise. */
function stringBytes (text: string): number {
  // Every character is Latin-1 exactly when the string has none above U+00FF.
  return /[\u0100-\uffff]/.test(text) ? 2 * text.length : text.length
}

/**
 * The heap one entry of the in-process store takes: its key, body and tag, the encodings of its body
 * (`encodedBytes`: counted when stored, since the first answer that can take them makes them), and the fixed overhead.
 */
export function entryBytes (key: string, entry: CacheEntry, encodedBytes: (body: string) => number): number {
  return stringBytes(key) + stringBytes(entry.body) + stringBytes(entry.etag) + encodedBytes(entry.body) + ENTRY_OVERHEAD_BYTES
}
