import { readFileSync } from 'node:fs'
import t, { type Test } from 'tap'
import { parseAllDocuments } from 'yaml'
import { ConfigMap, Secret, Service, ServiceAccount } from 'kubernetes-models/v1'
import { Deployment } from 'kubernetes-models/apps/v1'
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2'
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1'
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1'
import type { IContainer } from 'kubernetes-models/v1/Container'
import { heapMiB, imageNodeOptions, memoryBytes, resolvedInContainer } from '../../../bench/container.ts'
import { ConfigSchema, loadConfig, type Config } from '../../../src/config.ts'
import { sharedApp } from './app.ts'
import { onPath, run } from './run.ts'

const root = new URL('../../../deploy/kubernetes/', import.meta.url)
const read = (path: string): string => readFileSync(new URL(path, root), 'utf8')

interface Manifest { apiVersion: string, kind: string, metadata: { name: string } }

/** The schema (kubernetes-models, from the Kubernetes OpenAPI) each kind is validated against. */
const MODELS: Record<string, new (data: never) => { validate: () => void }> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'apps/v1/Deployment': Deployment,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy
}

function documents (text: string): Manifest[] {
  return parseAllDocuments(text).map((document) => {
    if (document.errors.length > 0) throw document.errors[0]
    return document.toJS() as Manifest
  })
}

const kubectl = onPath('kubectl')

const kustomized = new Map<string, Promise<Manifest[]>>()

/** What `kubectl apply -k dir` would send: kustomize's output (kubectl embeds kustomize), built once for the tests that read it. */
async function kustomize (dir: string): Promise<Manifest[]> {
  const build = async (): Promise<Manifest[]> => {
    const built = await run('kubectl', ['kustomize', new URL(dir, root).pathname])
    if (built.status !== 0) throw new Error(`kubectl kustomize ${dir}: ${built.stderr}`)
    return documents(built.stdout)
  }
  const once = kustomized.get(dir) ?? build()
  kustomized.set(dir, once)
  return await once
}

/** The base's resources read straight from the files its kustomization lists (kustomize adds only the image tag). */
function baseFiles (): Manifest[] {
  const { resources } = documents(read('base/kustomization.yaml'))[0] as unknown as { resources: string[] }
  return resources.flatMap((file) => documents(read(`base/${file}`)))
}

function find<T> (manifests: Manifest[], kind: string): T {
  const found = manifests.filter((manifest) => manifest.kind === kind)
  if (found.length !== 1) throw new Error(`${found.length} ${kind}`)
  return found[0] as unknown as T
}

const secretTemplate = documents(read('base/secret.example.yaml'))[0] as unknown as { stringData: Record<string, string> }

/** The configuration the pod starts with: the ConfigMap, and the Secret's keys given stand-in values. */
function podConfig (manifests: Manifest[]): { config: Config, keys: string[] } {
  const { data } = find<{ data: Record<string, string> }>(manifests, 'ConfigMap')
  const secrets = Object.fromEntries(Object.keys(secretTemplate.stringData).map((key) => [key, `stand-in-${key}`]))
  return { config: loadConfig({ ...data, ...secrets }), keys: [...Object.keys(data), ...Object.keys(secrets)] }
}

function checkManifests (t: Test, manifests: Manifest[]): void {
  for (const manifest of manifests) {
    const Model = MODELS[`${manifest.apiVersion}/${manifest.kind}`]
    t.ok(Model, `${manifest.apiVersion} ${manifest.kind} is a kind we validate`)
    if (Model !== undefined) t.doesNotThrow(() => new Model(manifest as never).validate(), `${manifest.kind} ${manifest.metadata.name} is valid`)
  }
  t.same(manifests.map((manifest) => manifest.kind).sort(),
    ['ConfigMap', 'Deployment', 'HorizontalPodAutoscaler', 'NetworkPolicy', 'PodDisruptionBudget', 'Service', 'ServiceAccount'])

  const { config, keys } = podConfig(manifests)
  const known = Object.keys(ConfigSchema.properties)
  for (const key of keys) t.ok(known.includes(key), `${key} is a configuration variable`)
  t.equal(config.HOST, '0.0.0.0', 'reachable from the Service')

  const deployment = find<Deployment>(manifests, 'Deployment')
  const pod = deployment.spec?.template.spec
  const podLabels = deployment.spec?.template.metadata?.labels ?? {}
  const [container] = pod?.containers ?? [] as IContainer[]
  const http = container?.ports?.find((port) => port.name === 'http')
  t.equal(http?.containerPort, config.PORT, 'the container port is PORT')
  t.same(container?.envFrom, [{ configMapRef: { name: 'profile-bff' } }, { secretRef: { name: 'profile-bff' } }])
  t.same(container?.livenessProbe?.httpGet, { path: '/healthz', port: 'http' })
  t.same(container?.readinessProbe?.httpGet, { path: '/readyz', port: 'http' })
  t.same(deployment.spec?.selector.matchLabels, podLabels)

  const preStop = container?.lifecycle?.preStop?.exec?.command ?? []
  t.equal(preStop[0], 'sleep')
  const drainSeconds = Number(preStop[1]) + (config.SHUTDOWN_DELAY_MS + config.SHUTDOWN_TIMEOUT_MS) / 1000
  t.ok((pod?.terminationGracePeriodSeconds ?? 30) >= drainSeconds + 2,
    `the grace period (${pod?.terminationGracePeriodSeconds} s) covers preStop + SHUTDOWN_DELAY_MS + SHUTDOWN_TIMEOUT_MS (${drainSeconds} s) and the close`)

  for (const kind of ['requests', 'limits'] as const) {
    t.ok(container?.resources?.[kind]?.cpu, `cpu ${kind}`)
    t.ok(container?.resources?.[kind]?.memory, `memory ${kind}`)
  }
  t.match(pod?.securityContext, { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } })
  t.match(container?.securityContext, { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } })
  t.equal(pod?.automountServiceAccountToken, false)

  const service = find<Service>(manifests, 'Service')
  t.same(service.spec?.selector, podLabels)
  t.same(service.spec?.ports?.map((port) => port.targetPort), ['http'])

  const hpa = find<HorizontalPodAutoscaler>(manifests, 'HorizontalPodAutoscaler')
  t.same(hpa.spec?.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata?.name })
  t.ok((hpa.spec?.minReplicas ?? 1) >= 2, 'at least two pods, so one can be drained')
  t.equal(config.UPSTREAM_EXPECTED_INSTANCES, hpa.spec?.maxReplicas, 'pods started during a Redis outage split the upstream budget by the largest fleet')
  t.equal(deployment.spec?.replicas, undefined, 'the autoscaler owns the replica count')

  const pdb = find<PodDisruptionBudget>(manifests, 'PodDisruptionBudget')
  t.same(pdb.spec?.selector?.matchLabels, podLabels)

  const policy = find<NetworkPolicy>(manifests, 'NetworkPolicy')
  t.same(policy.spec?.podSelector?.matchLabels, podLabels)
  t.same(policy.spec?.policyTypes, ['Ingress', 'Egress'], 'both directions restricted')
  t.same(policy.spec?.ingress?.flatMap((rule) => rule.ports?.map((port) => port.port)), ['http'], 'in: the service port only')
  const egressPorts = policy.spec?.egress?.flatMap((rule) => rule.ports?.map((port) => port.port)) ?? []
  const redisPort = Number(new URL(config.REDIS_URL ?? '').port || 6379)
  for (const port of [53, redisPort, 443]) t.ok(egressPorts.includes(port), `out: ${port}`)
}

t.test('the base, as its files list it: valid objects, consistent with the service', async (t) => {
  checkManifests(t, baseFiles())
})

t.test('the base, as kustomize builds it', { skip: kubectl ? false : 'kubectl (with its kustomize) is not installed here' }, async (t) => {
  const manifests = await kustomize('base')
  checkManifests(t, manifests)
  t.match(find<Deployment>(manifests, 'Deployment').spec?.template.spec?.containers[0]?.image, /^profile-bff:\d+\.\d+\.\d+$/, 'a pinned tag')
})

t.test('the Redis Cluster overlay: REDIS_CLUSTER=true, a seed node without a database, the rest as the base', {
  skip: kubectl ? false : 'kubectl (with its kustomize) is not installed here'
}, async (t) => {
  const manifests = await kustomize('overlays/redis-cluster')
  checkManifests(t, manifests)
  const { config } = podConfig(manifests)
  t.equal(config.REDIS_CLUSTER, true)
  t.equal(new URL(config.REDIS_URL ?? '').pathname, '', 'a cluster has no /db')
  const base = await kustomize('base')
  t.same(find<Deployment>(manifests, 'Deployment'), find<Deployment>(base, 'Deployment'))
})

t.test('memory: the image\'s NODE_OPTIONS size the heap from the container\'s limit, which holds the in-process store with room to spare', async (t) => {
  const deployment = find<Deployment>(baseFiles(), 'Deployment')
  const storeBytes = podConfig(baseFiles()).config.CACHE_MEMORY_MB * 1024 * 1024
  const [container] = deployment.spec?.template.spec?.containers ?? [] as IContainer[]
  t.equal(container?.env?.find((variable) => variable.name === 'NODE_OPTIONS'), undefined, 'the image\'s NODE_OPTIONS apply')
  const limit = memoryBytes(String(container?.resources?.limits?.memory))
  const request = memoryBytes(String(container?.resources?.requests?.memory))
  const { oldSpace = 0, youngSpace = 0 } = heapMiB(resolvedInContainer(imageNodeOptions(readFileSync(new URL('../../Dockerfile', root), 'utf8')), limit))
  const mib = 1024 * 1024
  t.ok(oldSpace * mib >= 2 * storeBytes, `the old generation (${oldSpace} MiB) holds the in-process store's CACHE_MEMORY_MB (${storeBytes / mib} MiB) twice over`)
  t.ok((oldSpace + youngSpace) * mib <= limit / 2, `V8's heap (${oldSpace} + ${youngSpace} MiB) is at most half the limit: the rest is Node's own, code and buffers`)
  t.ok(request <= limit)
})

t.test('the Secret is a template: every key a configuration variable, no value', async (t) => {
  t.doesNotThrow(() => new Secret(secretTemplate as never).validate())
  const known = Object.keys(ConfigSchema.properties)
  t.same(Object.keys(secretTemplate.stringData).sort(), ['ADMIN_TOKEN', 'CLIENT_ID', 'CLIENT_SECRET'])
  for (const [key, value] of Object.entries(secretTemplate.stringData)) {
    t.ok(known.includes(key), key)
    t.equal(value, '', `${key} has no value`)
  }
  const { resources } = documents(read('base/kustomization.yaml'))[0] as unknown as { resources: string[] }
  t.notOk(resources.includes('secret.example.yaml'), 'never applied: it would blank the real Secret')
})

t.test('the probes\' paths answer 200 on the service', async (t) => {
  const deployment = find<Deployment>(baseFiles(), 'Deployment')
  const container = deployment.spec?.template.spec?.containers[0]
  const app = await sharedApp()
  for (const probe of [container?.livenessProbe, container?.readinessProbe, container?.startupProbe]) {
    const path = probe?.httpGet?.path ?? ''
    t.equal((await app.inject(path)).statusCode, 200, path)
  }
})
