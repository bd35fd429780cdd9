/**
 * A test's `skip` option when it needs a tool only `.ci/run` installs (Chromium, promtool): false when the tool
 * is here, else the reason, which tap prints. With PBFF_REQUIRE_ALL=1, which `.ci/run` sets, a missing tool
 * fails the file instead: there, a skip would hide a test that must run.
 */
export function skipWithout (present: boolean, reason: string): string | false {
  if (present) return false
  if (process.env.PBFF_REQUIRE_ALL === '1') throw new Error(`${reason}, and PBFF_REQUIRE_ALL=1 requires it`)
  return `${reason}; .ci/run installs it`
}
