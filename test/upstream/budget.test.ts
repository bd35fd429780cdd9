// The fleet-wide upstream budget's tests (its units, and the app with it), in one process (docs/testing.md); the Redis outage has a process of its own.
import './budget/fleet.ts'
import './budget/priorities.ts'
import './budget/adaptive.ts'
import './budget/fallback.ts'
import './budget/factory.ts'
import './budget/reserve.ts'
import './budget/arrival.ts'
import './budget/app.ts'
