import { readFileSync } from 'node:fs'
import { parseAllDocuments } from 'yaml'

// The memory settings production runs with: the image's NODE_OPTIONS (Dockerfile, service stage) in the container
// the Kubernetes manifest gives it (deploy/kubernetes/base/deployment.yaml). Node sizes a percentage of the heap from
// the container's memory limit (cgroup); the benchmark, which runs no container, gives the same sizes in MiB.

const MIB = 1024 * 1024
const UNITS: Record<string, number> = { '': 1, Ki: 1024, Mi: MIB, Gi: 1024 * MIB, k: 1e3, M: 1e6, G: 1e9 }

/** A Kubernetes memory quantity (`512Mi`, `1Gi`, `500M`) in bytes. */
export function memoryBytes (quantity: string): number {
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|k|M|G)?$/.exec(quantity.trim())
  if (match === null) throw new Error(`not a memory quantity this benchmark reads: ${quantity}`)
  return Math.round(Number(match[1]) * (UNITS[match[2] ?? ''] as number))
}

/** The NODE_OPTIONS an `ENV` line of the Dockerfile's `service` stage sets ('' when none does). */
export function imageNodeOptions (dockerfile: string): string {
  const service = dockerfile.split(/^(?=FROM )/m).find((stage) => /^FROM \S+ AS service\s*$/m.test(stage.split('\n')[0] ?? ''))
  if (service === undefined) throw new Error('the Dockerfile has no `service` stage')
  const env = [...service.matchAll(/^ENV (.+)$/gm)].map((match) => match[1] ?? '').join(' ')
  return /(?:^|\s)NODE_OPTIONS="([^"]*)"/.exec(env)?.[1] ?? /(?:^|\s)NODE_OPTIONS=(\S+)/.exec(env)?.[1] ?? ''
}

/** The memory limit of the Deployment's first container, in bytes. */
export function manifestMemoryLimit (deploymentYaml: string): number {
  const deployment = parseAllDocuments(deploymentYaml).map((document) => document.toJS() as DeploymentShape).find((doc) => doc?.kind === 'Deployment')
  const limit = deployment?.spec?.template?.spec?.containers?.[0]?.resources?.limits?.memory
  if (limit === undefined) throw new Error('the Deployment\'s container has no memory limit')
  return memoryBytes(String(limit))
}

/**
 * NODE_OPTIONS as Node resolves them in a container of `limitBytes`: `--max-old-space-size-percentage=P` becomes
 * the `--max-old-space-size` Node derives from the cgroup's limit (whole MiB, rounded down, as Node does).
 */
export function resolvedInContainer (nodeOptions: string, limitBytes: number): string {
  return nodeOptions.split(/\s+/).filter((option) => option !== '').map((option) => {
    const percentage = /^--max[-_]old[-_]space[-_]size[-_]percentage=(\d+(?:\.\d+)?)$/.exec(option)?.[1]
    return percentage === undefined ? option : `--max-old-space-size=${Math.floor(limitBytes * Number(percentage) / 100 / MIB)}`
  }).join(' ')
}

/** V8's heap in MiB as NODE_OPTIONS fix it: the old generation, and the young one (two semi-spaces and as much for new large objects). */
export function heapMiB (resolvedOptions: string): { oldSpace?: number, youngSpace?: number } {
  const flag = (name: string): number | undefined => {
    const value = new RegExp(`(?:^|\\s)--${name}=(\\d+)(?:\\s|$)`).exec(resolvedOptions)?.[1]
    return value === undefined ? undefined : Number(value)
  }
  const oldSpace = flag('max-old-space-size')
  const semiSpace = flag('max-semi-space-size')
  return { ...(oldSpace !== undefined && { oldSpace }), ...(semiSpace !== undefined && { youngSpace: 3 * semiSpace }) }
}

/** The image's NODE_OPTIONS in the manifest's container, read from the repository at `root`. */
export function productionMemory (root: string): { limitBytes: number, nodeOptions: string, resolved: string } {
  const nodeOptions = imageNodeOptions(readFileSync(`${root}/Dockerfile`, 'utf8'))
  const limitBytes = manifestMemoryLimit(readFileSync(`${root}/deploy/kubernetes/base/deployment.yaml`, 'utf8'))
  return { limitBytes, nodeOptions, resolved: resolvedInContainer(nodeOptions, limitBytes) }
}

interface DeploymentShape {
  kind?: string
  spec?: { template?: { spec?: { containers?: Array<{ resources?: { limits?: { memory?: string | number } } }> } } }
}
