import { HANDED_BACK } from './driver.ts'

/**
 * The read of a key that may start its load, in one round trip: the entry (HGETALL's reply) and, when it cannot be
 * served (absent, or past its staleUntil: ARGV[1], Redis's now), the purge mark and the claim of the load's lock
 * (SET NX of token ARGV[2] for ARGV[3] ms). KEYS: entry, purge mark, lock, all of the key's hash tag (one slot).
 * Answers {entry} when servable, else {entry, mark ('' for none), 1 if claimed else 0}.
 */
export const READ_OR_CLAIM = `
local entry = redis.call('HGETALL', KEYS[1])
for i = 1, #entry, 2 do
  if entry[i] == 'u' and tonumber(entry[i + 1]) and tonumber(entry[i + 1]) > tonumber(ARGV[1]) then return {entry} end
end
local mark = redis.call('GET', KEYS[2]) or ''
local claimed = redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[3], 'NX') and 1 or 0
return {entry, mark, claimed}`

/**
 * Stores a fill unless a newer one is there already (instances may finish loads out of order), as
 * stale if the purge mark (KEYS[2]) is no longer the one the load read when it started (a purge came
 * since: Redis orders the two, no clock does), and lets Redis expire it when it can no longer be served.
 * Stored stale is "fresh until it was stored": stale for every instance, whatever its clock. An entry handed back
 * after an outage (mark HANDED_BACK) is not written where Redis holds its version (answered with Redis's freshness
 * for it, and not told), and stored stale otherwise: a purge made meanwhile may have been lost with Redis's data (a
 * restart, a failover), and one revalidation a key is its price.
 * Then, in the same round trip, tells the other instances: PUBLISH of the fill on channel ARGV[10] (message ARGV[11])
 * when stored, and, for a load holding the lock KEYS[3] with token ARGV[9] ('' for none), its release (deleted while
 * it still carries the token: it may have expired and gone to another) and PUBLISH of ARGV[12], which wakes the waiters.
 * KEYS: entry, purge mark, lock (one hash tag); ARGV: status, body, etag, storedAt, the load's purge mark ('' for none),
 * freshUntil, staleUntil (Redis's clock), ttl in ms, then token, channel ('' to publish nothing), fill and release
 * messages. Answers the stored freshUntil (or, handed back, the one Redis holds for that version), or false.
 */
export const SET_IF_NEWER = `
local function store ()
  local previous = redis.call('HMGET', KEYS[1], 't', 'e', 'f')
  local handedBack = ARGV[5] == '${HANDED_BACK}'
  -- Before the times: the same version, stored by another instance, is stamped by that instance's estimate of Redis's clock.
  if handedBack and previous[1] and previous[2] == ARGV[3] then return previous[3], false end
  if previous[1] and tonumber(previous[1]) > tonumber(ARGV[4]) then return false, false end
  local freshUntil = ARGV[6]
  if handedBack then freshUntil = ARGV[4] end
  local purged = redis.call('GET', KEYS[2])
  if purged and purged ~= ARGV[5] then freshUntil = ARGV[4] end
  redis.call('HSET', KEYS[1], 's', ARGV[1], 'b', ARGV[2], 'e', ARGV[3], 't', ARGV[4], 'f', freshUntil, 'u', ARGV[7])
  redis.call('PEXPIRE', KEYS[1], ARGV[8])
  return freshUntil, true
end
local stored, written = store()
if written and ARGV[10] ~= '' then redis.call('PUBLISH', ARGV[10], ARGV[11]) end
if ARGV[9] ~= '' then
  if redis.call('GET', KEYS[3]) == ARGV[9] then redis.call('DEL', KEYS[3]) end
  redis.call('PUBLISH', ARGV[10], ARGV[12])
end
return stored`
