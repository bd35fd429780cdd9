// The HTTP surface's tests (routes, validation, errors, headers, compression), in one process: a process per file cost more than the tests themselves (docs/testing.md).
import './http/answer-headers.ts'
import './http/compression.ts'
import './http/error-headers.ts'
import './http/errors.ts'
import './http/expected-failures.ts'
import './http/routes.ts'
import './http/validation-errors.ts'
import './http/validation.ts'
