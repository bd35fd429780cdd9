import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildService } from './build.js'
import { ProcessGroup } from './processes.js'
import { redisTrouble } from './redis-trouble.js'
import { startSimulator } from './targets.js'
const ROOT = fileURLToPath(new URL('..', import.meta.url))
const group = new ProcessGroup({ root: ROOT, logDir: mkdtempSync(join(tmpdir(), 'pbff-h10-')) })
process.on('exit', () => group.killAllNow())
buildService(ROOT, (line) => console.log(line))
const simulator = await startSimulator(group, 50)
try {
  console.log(JSON.stringify(await redisTrouble({ group, simulator, logLevel: 'info', seconds: 5 }), null, 2))
} finally {
  await group.stopAll()
}
process.exit()
