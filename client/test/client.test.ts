// The client's tests, one module after another in one process: a process per file cost more CPU than most of their tests (docs/testing.md).
import './batch.ts'
import './calls.ts'
import './cancel.ts'
import './dist.ts'
import './parse-profile.ts'
import './revalidation.ts'
import './types-drift.ts'
import './usernames.ts'
