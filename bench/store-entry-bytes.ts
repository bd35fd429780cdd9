import { profileOf, timelineOf } from '../dev/profiles.ts'
import { createEntry, type CacheEntry } from '../src/cache/cache-entry.ts'
import { cacheKey } from '../src/cache/keys.ts'
import { MemoryDriver } from '../src/cache/memory-driver.ts'
import type { User } from '../src/lookups/lookups.ts'
import { encodedBytes } from '../src/http/encoded-bodies.ts'

// The heap an entry of the in-process store takes, against what the store counts for it (CACHE_MEMORY_MB):
//   npx node --expose-gc --import tsx bench/store-entry-bytes.ts [usernames]
// Each username's profile and timeline from the bundled simulator, with the parsed profile a field query keeps.

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error('run with node --expose-gc')
const usernames = Number(process.argv[2] ?? 20_000)
const freshness = { freshMs: 300_000, staleMs: 86_400_000 }

gc()
const before = process.memoryUsage().heapUsed
const store = new MemoryDriver({ maxBytes: 1024 * 1024 * 1024, encodedBytes, purgeMemoryMs: 60_000, now: Date.now })
const parsed = new WeakMap<CacheEntry, User>()
let bodyBytes = 0
for (let n = 0; n < usernames; n++) {
  // As the lookups store them: the upstream's answer serialized, its keys built per request.
  for (const [resource, body] of [['profile', { user: profileOf(`member-${n}`) }], ['timeline', { posts: timelineOf(`member-${n}`) }]] as const) {
    const key = cacheKey('pbff:', resource, `member-${n}`)
    const entry = createEntry(200, JSON.stringify(body), Date.now(), freshness)
    bodyBytes += key.length + entry.body.length
    await store.set(key, entry)
    if (resource === 'profile') parsed.set(entry, (JSON.parse(entry.body) as { user: User }).user)
  }
}
gc()
const heap = process.memoryUsage().heapUsed - before
const entries = store.size
const perEntry = (bytes: number): string => `${Math.round(bytes / entries)} bytes`
process.stdout.write(`${entries} entries (${usernames} usernames' profiles and timelines): heap ${perEntry(heap)} an entry, ` +
  `counted ${perEntry(store.bytes)} (key and body characters alone: ${perEntry(bodyBytes)}); ` +
  `${Math.floor(64 * 1024 * 1024 / (store.bytes / entries))} such entries fit 64 MiB as counted\n`)
