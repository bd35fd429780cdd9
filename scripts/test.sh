#!/bin/bash
# npm test: the client's build and tap's plugin build, then the tap suite under coverage with the type check and lint
# beside it at the lowest CPU priority, so that they take what the suite leaves idle rather than time of their own
# (docs/testing.md). Run by npm, whose PATH holds the project's binaries. Fails when any part fails.
set -u
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

npm run build -w client > "$logs/client" 2>&1 & client=$!
tap build > "$logs/tap-build" 2>&1 & plugins=$!
wait "$client" || { cat "$logs/client"; exit 1; }
wait "$plugins" || { cat "$logs/tap-build"; exit 1; }

nice -n 19 tsc --noEmit > "$logs/typecheck" 2>&1 & typecheck=$!
nice -n 19 npm run lint > "$logs/lint" 2>&1 & lint=$!
npm run --silent test:suite
status=$?
wait "$typecheck" || { echo '# tsc --noEmit failed:'; cat "$logs/typecheck"; status=1; }
wait "$lint" || { echo '# npm run lint failed:'; cat "$logs/lint"; status=1; }
exit "$status"
