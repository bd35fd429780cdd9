// The cache across instances (purge, Redis Cluster, coalescing, stale-if-error), one module after another in one process: a process per file cost more CPU than most of their tests (docs/testing.md).
import './instances/admin-purge.ts'
import './instances/cluster.ts'
import './instances/coalescing.ts'
import './instances/stale-if-error.ts'
