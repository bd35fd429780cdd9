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
 * Stores a fill unless a newer fresh one is there already (instances may finish loads out of order), as
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
  -- A newer fill is kept, unless purged or stored stale ('f' no later than 't'): stamped by an instance whose estimate
  -- of Redis's clock ran ahead, it would refuse every revalidation, each stale read calling the upstream again.
  if previous[1] and tonumber(previous[1]) > tonumber(ARGV[4]) and tonumber(previous[3]) > tonumber(previous[1]) then return false, false end
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

/**
 * A background load's claim of the lock KEYS[1] (SET NX of token ARGV[1] for ARGV[2] ms), refused while the key's hold
 * KEYS[2] lasts: a revalidation failed less than a freshness ago, and the hold's end (Redis's clock, as the entries'
 * times) is past ARGV[3], Redis's now. Answers 1 if claimed, 0 if another holds the lock, else minus the ms the hold has
 * left. KEYS: lock, hold (the key's hash tag).
 */
export const CLAIM_UNLESS_HELD = `
local heldUntil = tonumber(redis.call('GET', KEYS[2]))
if heldUntil and heldUntil > tonumber(ARGV[3]) then return -math.ceil(heldUntil - tonumber(ARGV[3])) end
return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') and 1 or 0`

/**
 * After a failed background load: the hold KEYS[1], until ARGV[1] (Redis's clock; Redis drops it ARGV[2] ms on), unless
 * the purge mark KEYS[2] is no longer the one the load read (ARGV[3]: a purge since asks for a load of its own). Then,
 * for a load holding the lock KEYS[3] with token ARGV[4] ('' for none), its release and PUBLISH of ARGV[6] on ARGV[5],
 * as SET_IF_NEWER does: the hold is there before any waiter wakes. KEYS: hold, purge mark, lock (one hash tag).
 */
export const HOLD_BACK = `
if (redis.call('GET', KEYS[2]) or '') == ARGV[3] then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
if ARGV[4] ~= '' then
  if redis.call('GET', KEYS[3]) == ARGV[4] then redis.call('DEL', KEYS[3]) end
  redis.call('PUBLISH', ARGV[5], ARGV[6])
end
return 1`
