import t from 'tap'
import { npmStartOptions } from '../build.ts'
import { heapMiB, imageNodeOptions, manifestMemoryLimit, memoryBytes, resolvedInContainer } from '../container.ts'

// The settings the scan phase runs "as in the manifest's container": read from the Dockerfile and the manifest.

const MIB = 1024 * 1024

t.test('memory quantities as Kubernetes writes them', async (t) => {
  t.equal(memoryBytes('512Mi'), 512 * MIB)
  t.equal(memoryBytes('1Gi'), 1024 * MIB)
  t.equal(memoryBytes('500M'), 500_000_000)
  t.equal(memoryBytes('1048576'), MIB)
  t.throws(() => memoryBytes('512 MB'), /not a memory quantity/)
})

t.test('the NODE_OPTIONS of the service stage, quoted or not, and only of that stage', async (t) => {
  const dockerfile = (service: string): string => `FROM node AS build\nENV NODE_OPTIONS=--max-old-space-size=4096\nFROM node AS service\n${service}\nCMD ["node"]\n`
  t.equal(imageNodeOptions(dockerfile('ENV HOST=0.0.0.0 PORT=3000\nENV NODE_OPTIONS="--a=1 --b=2"')), '--a=1 --b=2')
  t.equal(imageNodeOptions(dockerfile('ENV PORT=3000 NODE_OPTIONS=--a=1')), '--a=1')
  t.equal(imageNodeOptions(dockerfile('ENV PORT=3000')), '', 'none')
  t.throws(() => imageNodeOptions('FROM node AS build\n'), /no `service` stage/)
})

t.test('the manifest\'s limit, and a percentage of it as Node resolves it in the container', async (t) => {
  const deployment = 'kind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n        - resources:\n            limits:\n              memory: 512Mi\n'
  t.equal(manifestMemoryLimit(`kind: Service\n---\n${deployment}`), 512 * MIB)
  t.throws(() => manifestMemoryLimit('kind: Deployment\n'), /no memory limit/)
  t.equal(resolvedInContainer('--max-old-space-size-percentage=25 --max-semi-space-size=16', 512 * MIB), '--max-old-space-size=128 --max-semi-space-size=16')
  t.equal(resolvedInContainer('--max_old_space_size_percentage=33.3', 512 * MIB), '--max-old-space-size=170', 'whole MiB, rounded down')
  t.equal(resolvedInContainer('', 512 * MIB), '')
  t.same(heapMiB('--max-old-space-size=128 --max-semi-space-size=16'), { oldSpace: 128, youngSpace: 48 })
  t.same(heapMiB('--enable-source-maps'), {})
})

t.test('`npm start`\'s node options, from its script', async (t) => {
  t.same(npmStartOptions('node dist/server.js'), [])
  t.same(npmStartOptions('node --max-old-space-size=128 --max-semi-space-size=16 dist/server.js'), ['--max-old-space-size=128', '--max-semi-space-size=16'])
  t.throws(() => npmStartOptions('tsx src/server.ts'), /not `node \[options\] dist\/server.js`/)
})
