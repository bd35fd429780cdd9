/**
 * The fleet's upstream budget: one token bucket in one hash, on Redis's clock (times come in as arguments, converted
 * by each instance, so a clock the tests move moves the bucket too). An instance leases several calls at once; what
 * a lease hands out stays counted as `held` for two lease periods (this one and the next: a lease lapses before
 * then), and the bucket refills only up to its depth less what is held, so what the instances hold plus what the
 * bucket holds never exceeds the depth, and the calls sent in any window stay within rate x window + depth.
 *
 * The effective rate is the last halving's (`cut`, made at `cutAt`), climbing back from `from` by `recover` calls/s
 * per ms, computed from those timestamps when read; the refill since the last lease is counted at the rate at its
 * start (never more than the rate in force). The bucket's depth shrinks with the effective rate.
 */

/** The rate at time x (`cut` absent: never halved), shared by both scripts. */
const RATE_AT = `
local function rateAt (rate, recover, cut, from, x)
  if cut == nil then return rate end
  return math.min(rate, cut + recover * math.max(0, x - from))
end`

/**
 * KEYS[1] the bucket; ARGV: now, calls wanted, configured rate (calls/s), depth, lease ms, share of the depth a
 * lease must leave in the bucket, recovery (calls/s per ms), state ttl ms, batch (the calls worth asking again for),
 * 1 to empty the bucket first (Redis was away for the instance, and the bucket refilled meanwhile as if nobody had sent
 * a call), once however many instances come back: not again within its refill time.
 * Returns the calls granted, the ms until a batch more could be had (0 while the bucket still has calls), the
 * last halving (cut, cutAt, from; '' if none), and until when the bucket counts this lease's calls as held.
 */
export const LEASE = `${RATE_AT}
local s = redis.call('HMGET', KEYS[1], 'level', 'at', 'epoch', 'held', 'heldBefore', 'cut', 'cutAt', 'from', 'drainedAt')
local now, want, rate, depth = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local leaseMs, reserveShare, recover = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local cut, from = tonumber(s[6]), tonumber(s[8]) or 0
local at = tonumber(s[2]) or now
-- An instance whose clock runs a little behind another's never moves the bucket back in time.
local t = math.max(now, at)
local effective = rateAt(rate, recover, cut, from, t)
local room = math.max(1, depth * effective / rate)
local epoch = math.floor(t / leaseMs)
local last, held, heldBefore = tonumber(s[3]) or epoch, tonumber(s[4]) or 0, tonumber(s[5]) or 0
if epoch == last + 1 then heldBefore, held = held, 0 elseif epoch > last + 1 then heldBefore, held = 0, 0 end
local level = tonumber(s[1]) or room
level = math.max(0, math.min(room - held - heldBefore, level + rateAt(rate, recover, cut, from, at) * (t - at) / 1000))
if ARGV[10] == '1' and t - (tonumber(s[9]) or -1e18) >= depth * 1000 / rate then
  level = 0
  redis.call('HSET', KEYS[1], 'drainedAt', tostring(t))
end
local reserve = math.floor(reserveShare * room)
local granted = math.max(0, math.min(want, math.floor(level - reserve)))
level = level - granted
held = held + granted
local retry = 0
-- Empty now, or short of what was wanted: when to ask again, with a batch to be had (no more than the bucket holds).
if granted < want or level - reserve < 1 then
  local short = reserve + math.min(tonumber(ARGV[9]), math.max(1, room - reserve)) - level
  retry = short * 1000 / effective
  -- Held calls leave the count only when their lease period is over.
  if level + short > room - held - heldBefore then retry = math.max(retry, (epoch + 1) * leaseMs - t) end
  retry = math.max(1, math.ceil(retry))
end
redis.call('HSET', KEYS[1], 'level', tostring(level), 'at', tostring(t), 'epoch', epoch, 'held', held, 'heldBefore', heldBefore)
redis.call('PEXPIRE', KEYS[1], ARGV[8])
return {granted, retry, tostring(cut or ''), s[7] or '', tostring(from), tostring((epoch + 2) * leaseMs)}`

/**
 * KEYS[1] the bucket; ARGV: now, configured rate, recovery (calls/s per ms), hold ms (the recovery starts after it),
 * cooldown ms, floor (share of the rate), state ttl ms. Halves the rate in force unless the last halving is more
 * recent than the cooldown. Returns the last halving (cut, cutAt, from).
 */
export const SLOW_DOWN = `${RATE_AT}
local s = redis.call('HMGET', KEYS[1], 'cut', 'cutAt', 'from')
local now, rate, recover = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local cut, cutAt, from = tonumber(s[1]), tonumber(s[2]), tonumber(s[3]) or 0
if cut == nil or now - cutAt >= tonumber(ARGV[5]) then
  cut = math.max(rate * tonumber(ARGV[6]), rateAt(rate, recover, cut, from, now) / 2)
  cutAt, from = now, now + tonumber(ARGV[4])
  redis.call('HSET', KEYS[1], 'cut', tostring(cut), 'cutAt', tostring(cutAt), 'from', tostring(from))
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
end
return {tostring(cut), tostring(cutAt), tostring(from)}`
