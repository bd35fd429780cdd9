// What the app reports of itself (/metrics, the dashboard and alerts on it, /docs/json checked against its answers), one module after another in one process: a process per file cost more CPU than most of their tests (docs/testing.md).
import './reports/metrics.ts'
import './reports/observability.ts'
import './reports/openapi-truth.ts'
