import { spawnSync } from 'node:child_process'
import { cpSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { applyPatches, applyVariant, VARIANTS } from '../device-variants.ts'

// bench:devices measures each variant as the service with one edit: an edit that no longer applies must stop it,
// and every edit must still apply to what tsc builds from the sources as they are.

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

t.test('a patch applies when its text is there exactly once, and names its variant otherwise', async (t) => {
  const patch = { file: 'a.js', find: 'one()', replace: 'two()' }
  t.equal(applyPatches('x(); one(); y();', [patch], 'v'), 'x(); two(); y();')
  t.equal(applyPatches('one()', [{ ...patch, replace: '$&$&' }], 'v'), '$&$&', 'the replacement is taken literally')
  t.throws(() => applyPatches('x();', [patch], 'v'), /variant v: a\.js holds 0 copies/)
  t.throws(() => applyPatches('one(); one();', [patch], 'v'), /variant v: a\.js holds 2 copies/)
})

t.test('every variant\'s edits apply to the service as tsc builds it, and leave JavaScript that parses', async (t) => {
  const workDir = mkdtempSync(join(tmpdir(), 'pbff-devices-test-'))
  t.teardown(() => { rmSync(workDir, { recursive: true, force: true }) })
  const built = join(workDir, 'dist')
  const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', built], { cwd: ROOT, encoding: 'utf8' })
  t.equal(tsc.error, undefined, 'tsc ran')
  for (const variant of VARIANTS) {
    const dir = join(workDir, variant.name)
    cpSync(built, dir, { recursive: true })
    const files = applyVariant(dir, variant)
    for (const file of files) {
      const check = spawnSync(process.execPath, ['--check', file], { encoding: 'utf8' })
      t.equal(check.status, 0, `${variant.name}: ${file.slice(dir.length + 1)} parses ${check.stderr}`)
    }
    t.equal(files.length > 0 || variant.env !== undefined, true, `${variant.name} changes something`)
  }
})
