// Apps against a misbehaving upstream or identity provider (errors, tokens, resilience), one module after another in one process: a process per file cost more CPU than most of their tests (docs/testing.md).
import './apps/errors.ts'
import './apps/retry-after.ts'
import './apps/refusals.ts'
import './apps/token-app.ts'
import './apps/token-store.ts'
import './apps/token-outage.ts'
import './apps/resilience-app.ts'
import './apps/short-timeouts.ts'
