import { setFlagsFromString } from 'node:v8'

/**
 * V8 allocates an allocation site's objects straight in the old generation once enough of them outlive a
 * young-generation GC. A herd of concurrent requests held for the upstream does that to Node's request and
 * response objects, and the decision stayed for the rest of the process's life: every later request's objects
 * were born old, kept their young children alive through each scavenge (10 ms pauses instead of 0.6 ms, 99%
 * promoted) and a cache hit cost 1.5 times the CPU, with a p99 four times the floor's. Set before the app
 * allocates anything (imported first by server.ts); see docs/performance-history.md.
 */
setFlagsFromString('--no-allocation-site-pretenuring')

/**
 * Baseline (Sparkplug) code for every function on its first call, rather than after it has run interpreted
 * a while: a herd of cold requests right after start-up runs the miss path hundreds of times at once, on
 * code V8 has not compiled yet. Over two sets of ten herds (1,000 requests, two fresh instances), the waiters'
 * median came 15-17 ms closer to its floor; hot code is optimized further either way.
 */
setFlagsFromString('--always-sparkplug')

// No heap sizes here: V8 fixes them when the isolate is created, before any module runs, and ignores
// --max-old-space-size or --max-semi-space-size set later (test/ops/files/v8-flags.ts shows it). The image sizes
// the heap from its container's memory limit through NODE_OPTIONS (Dockerfile; docs/operations.md, "Sizing").
