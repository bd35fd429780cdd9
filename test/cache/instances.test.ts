// The cache across instances (purge, the call bound swept, Redis Cluster, coalescing, stale-if-error, failed revalidations held), one module after another in one process: a process per file cost more CPU than most of their tests (docs/testing.md).
import './instances/admin-purge.ts'
import './instances/call-bound.ts'
import './instances/cluster.ts'
import './instances/coalescing.ts'
import './instances/stale-if-error.ts'
import './instances/failed-revalidation.ts'
import './instances/coherence.ts'
import './instances/round-trips.ts'
