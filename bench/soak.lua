-- wrk's script for the soak (bench/soak.ts runs `wrk -t1 -c<n> -d<s>s -s bench/soak.lua <url> -- <prefix> <usernames> <seed>`).
-- The paths: each of <usernames> usernames (<prefix>0, <prefix>1, ...) on the three data routes (/profile/u,
-- /profile/u/timeline, /user/u?query=name), in one order shuffled with <seed>, formatted once; each request is the
-- next of them, cycling. The `done` hook (its JSON line) is bench/wrk.lua's, loaded from PBFF_WRK_LUA; this script's
-- init and request replace that one's. No response() hook, which would make wrk hand every response's headers to Lua.

dofile(os.getenv('PBFF_WRK_LUA'))

local requests = {}
local count = 0
local next = 0

function init (args)
  local prefix, usernames, seed = args[1], tonumber(args[2]), tonumber(args[3])
  local paths = {}
  for n = 0, usernames - 1 do
    local username = prefix .. n
    paths[#paths + 1] = '/profile/' .. username
    paths[#paths + 1] = '/profile/' .. username .. '/timeline'
    paths[#paths + 1] = '/user/' .. username .. '?query=name'
  end
  math.randomseed(seed)
  for i = #paths, 2, -1 do
    local j = math.random(i)
    paths[i], paths[j] = paths[j], paths[i]
  end
  for i = 1, #paths do requests[i] = wrk.format('GET', paths[i]) end
  count = #paths
end

function request ()
  next = next % count + 1
  return requests[next]
end
