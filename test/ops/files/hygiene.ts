import { readdirSync, readFileSync } from 'node:fs'
import t from 'tap'

const root = new URL('../../../', import.meta.url)
const read = (path: string): string => readFileSync(new URL(path, root), 'utf8')
const pkg = JSON.parse(read('package.json')) as { version: string, license: string }
const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { license?: string, dev?: boolean, link?: boolean }> }

/** Licenses that let an MIT-licensed service ship the package alongside it. */
const PERMISSIVE = new Set(['MIT', 'ISC', 'BSD-2-Clause', 'BSD-3-Clause', 'Apache-2.0', 'BlueOak-1.0.0', '0BSD'])

t.test('the project is MIT: LICENSE, package.json and the lockfile say so', async (t) => {
  t.equal(pkg.license, 'MIT')
  t.match(read('LICENSE'), /^MIT License\n\nCopyright \(c\) \d{4} /)
  t.equal(lock.packages['']?.license, 'MIT')
})

t.test('every production dependency, direct or not, has a license compatible with it', async (t) => {
  // A workspace's link (client/) is no package of its own: its entry under its folder is checked.
  const shipped = Object.entries(lock.packages).filter(([path, entry]) => path !== '' && entry.dev !== true && entry.link !== true)
  t.ok(shipped.length > 50)
  for (const [path, entry] of shipped) t.ok(PERMISSIVE.has(entry.license ?? ''), `${path.replace(/^.*node_modules\//, '')}: ${entry.license}`)
})

t.test('the changelog has an Unreleased section and one for the current version', async (t) => {
  const changelog = read('CHANGELOG.md')
  const versions = [...changelog.matchAll(/^## \[([^\]]+)\]/gm)].map((match) => match[1])
  t.equal(versions[0], 'Unreleased')
  t.ok(versions.includes(pkg.version), `${pkg.version} is described`)
  t.match(changelog, new RegExp(`^## \\[${pkg.version.replace(/\./g, '\\.')}\\] - \\d{4}-\\d{2}-\\d{2}$`, 'm'))
})

/** Hand-written TypeScript under these folders (client/src/openapi.ts is generated from the OpenAPI document). */
const SMALL_MODULE_ROOTS = ['src', 'dev', 'bench']
const MAX_MODULE_LINES = 250

t.test(`no module of src/, dev/ or bench/ is longer than ${MAX_MODULE_LINES} lines`, async (t) => {
  const modules = SMALL_MODULE_ROOTS.flatMap((folder) => readdirSync(new URL(`${folder}/`, root), { recursive: true, encoding: 'utf8' })
    .filter((path) => path.endsWith('.ts'))
    .map((path) => `${folder}/${path}`))
  t.ok(modules.length > 80)
  for (const path of modules) {
    const lines = read(path).split('\n').length - 1
    t.ok(lines <= MAX_MODULE_LINES, `${path}: ${lines} lines`)
  }
})
