import pMap from 'p-map'
import { createEntry, type CacheEntry } from '../cache/cache-entry.ts'
import { cacheKey } from '../cache/keys.ts'
import type { CallerSignal, Served, SwrCache } from '../cache/swr-cache.ts'
import { RESOURCES, type Resource } from '../resources.ts'
import type { FreshnessPolicy } from './freshness.ts'
import type { ProfileField } from '../schemas/profile.ts'
import type { UpstreamAnswer, UpstreamClient } from '../upstream/upstream-client.ts'

export interface LookupsOptions {
  cache: Pick<SwrCache, 'get' | 'held' | 'markStale'>
  upstream: Pick<UpstreamClient, 'profile' | 'timeline'>
  keyPrefix: string
  freshness: FreshnessPolicy
  now?: () => number
  /** For the freshness jitter (tests pin it). */
  random?: () => number
}

/** A field query answered from a cached profile: the one-key body and the entry it came from. */
export interface FieldServed extends Served {
  fieldBody: string
}

export type User = Record<ProfileField, string>

/**
 * What the routes ask for, in their terms: a member's profile, timeline or one field, served through the
 * cache. An upstream 404 becomes a negative entry, cached like any other. `callerSignal` (see SwrCache.get)
 * lets a caller that goes away stop waiting, and cancel a load nobody waits for any more.
 */
export class Lookups {
  readonly #options: LookupsOptions
  readonly #now: () => number
  readonly #random: () => number
  /** A profile entry's parsed `user`, so that field queries on a held entry parse it once. */
  readonly #users = new WeakMap<CacheEntry, User>()

  constructor (options: LookupsOptions) {
    this.#options = options
    this.#now = options.now ?? Date.now
    this.#random = options.random ?? Math.random
  }

  async profile (username: string, callerSignal?: CallerSignal): Promise<Served> {
    return await this.#get('profile', username, async (signal) => await this.#options.upstream.profile(username, signal), callerSignal)
  }

  async timeline (username: string, callerSignal?: CallerSignal): Promise<Served> {
    return await this.#get('timeline', username, async (signal) => await this.#options.upstream.timeline(username, signal), callerSignal)
  }

  /** One field, from the cached profile; a miss loads the whole profile, which then serves all ten. */
  async field (username: string, field: ProfileField, callerSignal?: CallerSignal): Promise<FieldServed> {
    return this.#fieldOf(await this.profile(username, callerSignal), field)
  }

  /** The member's profile or timeline when this process holds it fresh (SwrCache.held): the hit path, without a promise. */
  held (kind: Resource, username: string): Served | undefined {
    return this.#options.cache.held(cacheKey(this.#options.keyPrefix, kind, username), kind)
  }

  /** One field when this process holds the profile fresh. */
  heldField (username: string, field: ProfileField): FieldServed | undefined {
    const served = this.held('profile', username)
    return served === undefined ? undefined : this.#fieldOf(served, field)
  }

  #fieldOf (served: Served, field: ProfileField): FieldServed {
    if (served.entry.status !== 200) return { ...served, fieldBody: '' }
    return { ...served, fieldBody: JSON.stringify({ [field]: this.userOf(served.entry)[field] }) }
  }

  /** Several members' profiles, each as `profile` serves it; a failure is that member's answer, not the others'. */
  async profiles (usernames: readonly string[], concurrency: number, callerSignal?: CallerSignal): Promise<Array<PromiseSettledResult<Served>>> {
    // At most `concurrency` at once, so one batch never overflows the upstream client's bounded queue.
    return await pMap(usernames, async (username): Promise<PromiseSettledResult<Served>> => await this.profile(username, callerSignal).then(
      (value) => ({ status: 'fulfilled', value }),
      (reason: unknown) => ({ status: 'rejected', reason })
    ), { concurrency })
  }

  /** Admin purge: the member's profile and timeline entries (negative ones too) become stale. */
  async purge (username: string): Promise<number> {
    return await this.#options.cache.markStale(RESOURCES.map((kind) => cacheKey(this.#options.keyPrefix, kind, username)))
  }

  async #get (
    kind: Resource, username: string, fetch: (signal: AbortSignal) => Promise<UpstreamAnswer<unknown>>, callerSignal: CallerSignal | undefined
  ): Promise<Served> {
    const { keyPrefix, cache, freshness } = this.#options
    return await cache.get(cacheKey(keyPrefix, kind, username), kind, async (signal): Promise<CacheEntry> => {
      const answer = await fetch(signal)
      const now = this.#now()
      return answer.found
        ? createEntry(200, JSON.stringify(answer.body), now, freshness[kind], this.#random)
        : createEntry(404, '', now, freshness.notFound, this.#random)
    }, callerSignal)
  }

  /** A profile entry's `user`, parsed once per entry. */
  userOf (entry: CacheEntry): User {
    let user = this.#users.get(entry)
    if (user === undefined) {
      user = (JSON.parse(entry.body) as { user: User }).user
      this.#users.set(entry, user)
    }
    return user
  }
}
