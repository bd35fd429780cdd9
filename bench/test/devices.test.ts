import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { applyPatches, VARIANTS } from '../device-variants.ts'

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

t.test('every variant\'s patches apply to the service as tsc builds it', async (t) => {
  const outDir = mkdtempSync(join(tmpdir(), 'pbff-devices-test-'))
  t.teardown(() => { rmSync(outDir, { recursive: true, force: true }) })
  const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', outDir], { cwd: ROOT, encoding: 'utf8' })
  t.equal(tsc.error, undefined, 'tsc ran')
  for (const variant of VARIANTS) {
    for (const patch of variant.patches) {
      t.doesNotThrow(() => applyPatches(readFileSync(join(outDir, patch.file), 'utf8'), [patch], variant.name), `${variant.name}: ${patch.file}`)
    }
  }
  t.same(VARIANTS.filter((variant) => variant.patches.length === 0 && variant.env === undefined).map(({ name }) => name), [], 'each variant changes something')
})
