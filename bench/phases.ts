import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { request, type Pool } from 'undici'
import type { RunningChild } from './processes.ts'
import type { BenchResults, ShelterRound } from './results.ts'
import { connectionsTo, countBy, simulatorCounts, stream, timedGet, type Timed } from './requests.ts'
import { socketBurst } from './socket-burst.ts'
import { percentile } from './stats.ts'
import { seededRandom, zipfSampler } from './zipf.ts'

/** The same request mix on every run. */
const ZIPF_SEED = 20_240_606
const WARM_CONCURRENCY = 10
const SHED_RETRIES = 10
const SHED_RETRY_PAUSE_MS = 1_000

/**
 * `rounds` herds of `requests` concurrent requests for a username nobody asked for yet, each against a
 * pair of instances started for it (sharing a cache, each having answered one request of its own), and
 * each with its floor: the same burst against a pair of fresh bare Fastify instances. One burst moves by
 * tens of milliseconds from the next on a shared machine, so the goal is checked on the median of the
 * rounds' differences; which of the two goes first alternates, so that a machine growing busier weighs on
 * both, and the last round's floor goes first, so that no floor burst shares the machine with an instance.
 * Returns the rounds and the last herd's instances, still running.
 */
export async function shelterRounds (
  { rounds, requests, clients, simulatorUrl, username, startPair, startFloorPair }: {
    rounds: number
    requests: number
    /** Addresses the requests come from (socketBurst). */
    clients: number
    simulatorUrl: string
    username: string
    startPair: () => Promise<RunningChild[]>
    startFloorPair: () => Promise<RunningChild[]>
  }
): Promise<{ rounds: ShelterRound[], instances: RunningChild[] }> {
  const results: ShelterRound[] = []
  let instances: RunningChild[] = []
  for (let round = 1; round <= rounds; round++) {
    const herd = async (): Promise<Omit<ShelterRound, 'floorP50Ms' | 'floorP99Ms'>> => {
      instances = await startPair()
      let kept = false
      try {
        const result = await shelter({ instances, simulatorUrl, requests, clients, username: `${username}-${round}` })
        // The last pair stays, for the hit path; the others go before the next burst.
        kept = round === rounds
        return result
      } finally {
        if (!kept) await Promise.all(instances.map(async (instance) => await instance.stop()))
      }
    }
    const floor = async (): Promise<Pick<ShelterRound, 'floorP50Ms' | 'floorP99Ms'>> => {
      const bares = await startFloorPair()
      try {
        return await shelterFloor(bares, requests, clients)
      } finally {
        await Promise.all(bares.map(async (bare) => await bare.stop()))
      }
    }
    if ((rounds - round) % 2 === 1) {
      const herdResult = await herd()
      results.push({ ...herdResult, ...await floor() })
    } else {
      const floorResult = await floor()
      results.push({ ...await herd(), ...floorResult })
    }
  }
  return { rounds: results, instances }
}

/**
 * `requests` concurrent requests for one username nobody asked for yet, spread evenly over `instances`
 * that share a cache. Each instance first answers a username of its own, so its token and upstream
 * connection are warm and only the username is cold.
 */
async function shelter (
  { instances, simulatorUrl, requests, clients, username }: { instances: RunningChild[], simulatorUrl: string, requests: number, clients: number, username: string }
): Promise<Omit<ShelterRound, 'floorP50Ms' | 'floorP99Ms'>> {
  for (const [index, instance] of instances.entries()) {
    const pool = connectionsTo(instance.url, 1)
    const warm = await timedGet(pool, `/profile/${username}-warm-up-${index}`).finally(async () => await pool.close())
    if (warm.status !== 200) throw new Error(`${instance.name} answered ${warm.status} ${warm.body.slice(0, 300)} to its warm-up request`)
  }
  const results = await socketBurst(instances.map((instance) => instance.port), `/profile/${encodeURIComponent(username)}`, requests, clients)
  const counts = await simulatorCounts(simulatorUrl)
  const latencies = results.map((result) => result.ms)
  return {
    upstreamCalls: counts.calls[`profile:${username}`] ?? 0,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    statuses: countBy(results, (result) => String(result.status)),
    xCache: countBy(results, (result) => result.xCache ?? 'none')
  }
}

/**
 * The same burst against bare Fastify instances (as many as the shelter had) holding each request for
 * the upstream latency: the floor.
 */
async function shelterFloor (bares: RunningChild[], requests: number, clients: number): Promise<Pick<ShelterRound, 'floorP50Ms' | 'floorP99Ms'>> {
  const results = await socketBurst(bares.map((bare) => bare.port), '/slow/profile/anyone', requests, clients)
  const failed = results.filter((result) => result.status !== 200).length
  if (failed > 0) throw new Error(`bare Fastify failed ${failed} of the floor burst's requests`)
  const latencies = results.map((result) => result.ms)
  return { floorP50Ms: percentile(latencies, 50), floorP99Ms: percentile(latencies, 99) }
}

/**
 * A Zipf-distributed stream of profile views over `usernames` usernames, against an instance that has
 * served nothing yet. Nothing else calls the upstream meanwhile, so the simulator's counters over the
 * phase belong to it.
 */
export async function zipfMix (
  { service, simulatorUrl, requests, usernames, exponent, concurrency }:
  { service: RunningChild, simulatorUrl: string, requests: number, usernames: number, exponent: number, concurrency: number }
): Promise<Omit<NonNullable<BenchResults['zipf']>, 'serviceRssBytes'>> {
  const sample = zipfSampler(usernames, exponent, seededRandom(ZIPF_SEED))
  const names = Array.from({ length: requests }, () => `zipf-${sample()}`)
  const pool = connectionsTo(service.url, concurrency)
  try {
    const before = await simulatorCounts(simulatorUrl)
    const started = performance.now()
    const results = await stream(pool, names.map((name) => `/profile/${name}`), concurrency)
    const seconds = (performance.now() - started) / 1000
    const after = await simulatorCounts(simulatorUrl)
    const calledTwice = Object.entries(after.calls).filter(([key, calls]) => key.startsWith('profile:zipf-') && calls > 1)
    return {
      requests,
      usernames,
      exponent,
      distinctRequested: new Set(names).size,
      upstreamCalls: after.dataCalls - before.dataCalls,
      usernamesCalledTwice: calledTwice.length,
      tokenExchanges: after.tokenRequests - before.tokenRequests,
      statuses: countBy(results, (result) => String(result.status)),
      seconds
    }
  } finally {
    await pool.close()
  }
}

/**
 * Loads every path into the service's cache, then checks that a second request for each is a 200 HIT:
 * the hit-path rounds measure hits only. Returns the bodies served.
 */
export async function warm (service: RunningChild, paths: string[]): Promise<string[]> {
  const pool = connectionsTo(service.url, WARM_CONCURRENCY)
  try {
    const first = await notShed(pool, paths)
    const failed = first.filter((result) => result.status !== 200)
    if (failed.length > 0) {
      throw new Error(`${service.name}: ${failed.length} warm-up requests failed (${JSON.stringify(countBy(failed, (result) => String(result.status)))}), e.g. ${failed[0]?.body.slice(0, 300)}`)
    }
    const second = await notShed(pool, paths)
    const notHits = second.filter((result) => result.status !== 200 || result.xCache !== 'HIT')
    if (notHits.length > 0) {
      throw new Error(`${service.name}: ${notHits.length} of ${paths.length} warmed paths were not a 200 HIT (${JSON.stringify(countBy(notHits, (result) => `${result.status} ${result.xCache ?? 'none'}`))})`)
    }
    return second.map((result) => result.body)
  } finally {
    await pool.close()
  }
}

/** Headers the server sends whatever it does (Date, keep-alive) or the floor makes per request (the id). */
const NOT_COPIED = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding', 'x-request-id'])

/** One hit as the load generator receives it: the headers (less NOT_COPIED) and body the floor is to send. */
export async function hitResponse (service: RunningChild, path: string): Promise<{ headers: Record<string, string>, body: string }> {
  const { status, headers, body } = await answerToCopy(service, path)
  if (status !== 200 || headers['x-cache'] !== 'HIT') throw new Error(`${service.name}: ${path} was not a 200 HIT`)
  return { headers, body }
}

/** An answer as the load generator receives it: its status, headers (less NOT_COPIED) and body, for a floor to send. */
export async function answerToCopy (service: RunningChild, path: string): Promise<{ status: number, headers: Record<string, string>, body: string }> {
  const response = await request(`${service.url}${path}`)
  const body = await response.body.text()
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(response.headers)) {
    if (!NOT_COPIED.has(name) && typeof value === 'string') headers[name] = value
  }
  return { status: response.statusCode, headers, body }
}

/**
 * Requests every path, asking again (a bounded number of times, a second apart) for those the service
 * shed with 503: after a load phase, an instance may refuse requests until its load sample clears.
 */
async function notShed (pool: Pool, paths: string[]): Promise<Timed[]> {
  const results = await stream(pool, paths, WARM_CONCURRENCY)
  for (let pass = 1; pass <= SHED_RETRIES; pass++) {
    const shed = results.flatMap((result, index) => result.status === 503 ? [index] : [])
    if (shed.length === 0) break
    await sleep(SHED_RETRY_PAUSE_MS)
    const retried = await stream(pool, shed.map((index) => paths[index] as string), WARM_CONCURRENCY)
    shed.forEach((index, position) => { results[index] = retried[position] as Timed })
  }
  return results
}

/** A browser's connections to one host over HTTP/1.1: how many of a page's single requests run at once. */
const BROWSER_CONNECTIONS = 6

/**
 * A list page of warm members, `pageViews` times: its profiles as single requests (over a browser's six
 * connections) against one batch request. Each page view is timed end to end.
 */
export async function batchVsSingles (
  { service, usernames, pageViews }: { service: RunningChild, usernames: string[], pageViews: number }
): Promise<NonNullable<BenchResults['batch']>> {
  const singlePaths = usernames.map((username) => `/profile/${encodeURIComponent(username)}`)
  const batchPath = `/profiles?${usernames.map((username) => `username=${encodeURIComponent(username)}`).join('&')}`
  const singlesPool = connectionsTo(service.url, BROWSER_CONNECTIONS)
  const batchPool = connectionsTo(service.url, 1)
  try {
    const singles: number[] = []
    const batches: number[] = []
    let singleBytes = 0
    let batchBytes = 0
    for (let view = 0; view < pageViews; view++) {
      const started = performance.now()
      const answers = await stream(singlesPool, singlePaths, BROWSER_CONNECTIONS)
      singles.push(performance.now() - started)
      const batch = await timedGet(batchPool, batchPath)
      batches.push(batch.ms)
      const failed = [...answers, batch].find((answer) => answer.status !== 200)
      if (failed !== undefined) throw new Error(`batch vs singles: a request answered ${failed.status} ${failed.body.slice(0, 200)}`)
      singleBytes = answers.reduce((sum, answer) => sum + Buffer.byteLength(answer.body), 0)
      batchBytes = Buffer.byteLength(batch.body)
    }
    const brotli = await batchPool.request({ method: 'GET', path: batchPath, headers: { 'accept-encoding': 'br' } })
    const brotliBytes = (await brotli.body.arrayBuffer()).byteLength
    return {
      usernames: usernames.length,
      pageViews,
      singles: { requests: usernames.length, p50Ms: percentile(singles, 50), p99Ms: percentile(singles, 99), bodyBytes: singleBytes },
      batch: { requests: 1, p50Ms: percentile(batches, 50), p99Ms: percentile(batches, 99), bodyBytes: batchBytes, brotliBytes }
    }
  } finally {
    await Promise.all([singlesPool.close(), batchPool.close()])
  }
}
