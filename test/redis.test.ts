// The Redis layer's health and the cache's clock, coordination, hang and outage on Redis, one module after another in one process: a process per file cost more CPU than most of their tests (docs/testing.md).
import './redis/health.ts'
import './redis/clock.ts'
import './redis/coordination.ts'
import './redis/hang.ts'
import './redis/outage.ts'
import './redis/bus-flap.ts'
import './redis/hand-back.ts'
