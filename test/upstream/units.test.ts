// The upstream layer's unit tests, in one process: a process per file cost more than the tests themselves (docs/testing.md).
import './units/backoff-window.ts'
import './units/breaker-recovery.ts'
import './units/circuit-breaker.ts'
import './units/concurrency-limiter.ts'
import './units/token-cipher.ts'
import './units/token-lifetime.ts'
import './units/token-manager.ts'
import './units/upstream-client.ts'
