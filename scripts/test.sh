#!/bin/bash
# npm test: the client's build and tap's plugin build, then the tap suite with the type check and lint beside it, at the
# suite's priority (docs/testing.md); with PBFF_COVERAGE=1 (.ci/run sets it), under c8 and its floor. Run by npm, whose
# PATH holds the project's binaries; arguments go to tap. Fails when any part fails.
set -u
logs=$(mktemp -d)
# Whatever way it ends, nothing it started outlives it.
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$logs"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Each part's exit code, its output printed when it failed.
failed () {
  echo "# $1 failed (exit $2):"
  cat "$logs/$3"
}

npm run build -w client > "$logs/client" 2>&1 & client=$!
tap build > "$logs/tap-build" 2>&1 & plugins=$!
wait "$client"; built=$?
wait "$plugins"; tapBuilt=$?
[ "$built" -eq 0 ] || failed 'the client build' "$built" client
[ "$tapBuilt" -eq 0 ] || failed 'tap build' "$tapBuilt" tap-build
[ "$built" -eq 0 ] && [ "$tapBuilt" -eq 0 ] || exit 1

# At the suite's priority: at the lowest, two busy neighbours left them a sliver of a core (npm test took 15 minutes).
# Beside ESLint's cache, tsc's: a second run checks only what changed.
tsc --noEmit --incremental --tsBuildInfoFile node_modules/.cache/tsc/tsbuildinfo > "$logs/typecheck" 2>&1 & typecheck=$!
npm run lint > "$logs/lint" 2>&1 & lint=$!
# Coverage slows every test process (docs/testing.md): it gates a landing, in CI, not every run.
script=test:suite
[ "${PBFF_COVERAGE:-}" = 1 ] && script=test:coverage
# In the background and waited for, so that a signal's trap runs at once rather than when the suite ends.
npm run --silent "$script" -- "$@" & suite=$!
wait "$suite"; status=$?
wait "$typecheck"; code=$?
[ "$code" -eq 0 ] || { failed 'tsc --noEmit' "$code" typecheck; [ "$status" -ne 0 ] || status=1; }
wait "$lint"; code=$?
[ "$code" -eq 0 ] || { failed 'npm run lint' "$code" lint; [ "$status" -ne 0 ] || status=1; }
exit "$status"
