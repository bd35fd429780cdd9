// The cache's unit and single-instance tests, in one process: a process per file cost more than the tests themselves (docs/testing.md).
import './units/bounded-lru.ts'
import './units/cache-stack.ts'
import './units/fields-timeline.ts'
import './units/http-caching.ts'
import './units/memory-driver.ts'
import './units/states.ts'
import './units/shared-tier.ts'
