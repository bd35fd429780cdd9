// Health, HTTP edges, half-closed connections, load shedding, logging and security headers, one module after another in one process: a process per file cost more CPU than most of their tests (docs/testing.md).
import './serving/health.ts'
import './serving/half-close.ts'
import './serving/http-edges.ts'
import './serving/load-shedding.ts'
import './serving/logging.ts'
import './serving/security.ts'
import './serving/warm-up.ts'
