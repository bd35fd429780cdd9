// Rate limits, slow clients and Redis's memory, one module after another in one process: a process per file cost more CPU than most of their tests (docs/testing.md).
import './limits/rate-limit.ts'
import './limits/rate-limit-clients.ts'
import './limits/redis-sizing.ts'
import './limits/shared-rate-counts.ts'
import './limits/slow-clients.ts'
