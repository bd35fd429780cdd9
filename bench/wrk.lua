-- wrk's script for the benchmark (bench/load.ts runs `wrk -t1 -c<n> -d<s>s -s bench/wrk.lua <url> -- <path>...`).
-- Each request is the next of the paths, pre-formatted once; no response() hook, which would make wrk hand every
-- response's headers to Lua. With PBFF_WRK_DELAY_MS above 0, each connection waits that long before its next
-- request (a rate of about connections / delay). At the end, one JSON line with the counts, the latency percentiles (µs) and wrk's
-- own CPU time (utime + stime from /proc/self/stat, in clock ticks), read once every thread has finished.

local requests = {}
local count = 0
local next = 0
local pause = tonumber(os.getenv('PBFF_WRK_DELAY_MS') or '0') or 0

function init (args)
  for i = 1, #args do
    count = count + 1
    requests[count] = wrk.format('GET', args[i])
  end
  if count == 0 then
    count = 1
    requests[1] = wrk.format('GET', wrk.path)
  end
end

function request ()
  next = next % count + 1
  return requests[next]
end

-- Defined only when wanted: wrk calls delay() before every request once it exists.
if pause > 0 then
  function delay ()
    return pause
  end
end

local function cpu_ticks ()
  local file = io.open('/proc/self/stat', 'r')
  if file == nil then return -1 end
  local stat = file:read('*a')
  file:close()
  -- The fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
  local fields = {}
  for value in stat:match('.*%) (.*)'):gmatch('%S+') do fields[#fields + 1] = value end
  return tonumber(fields[12]) + tonumber(fields[13])
end

function done (summary, latency, _)
  local e = summary.errors
  io.write(string.format(
    'PBFF_WRK {"requests":%d,"durationUs":%d,"bytes":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latencyUs":{"p50":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d,"mean":%.1f},"cpuTicks":%d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9), latency.max, latency.mean,
    cpu_ticks()))
end
