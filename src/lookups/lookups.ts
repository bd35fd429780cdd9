import pMap from 'p-map'
import { createEntry, type CacheEntry, type Representation } from '../cache/cache-entry.ts'
import type { CacheStack, Load, Served } from '../cache/cache-stack.ts'
import { cacheKey } from '../cache/keys.ts'
import { UPSTREAM_TIMEOUT } from '../errors.ts'
import type { Arrival, LoadBudget } from '../load-budget.ts'
import { RESOURCES, type Priority, type Resource } from '../resources.ts'
import type { FreshnessPolicy } from './freshness.ts'
import type { ProfileField } from '../schemas/profile.ts'
import type { UpstreamAnswer, UpstreamClient } from '../upstream/upstream-client.ts'

export interface LookupsOptions {
  cache: Pick<CacheStack, 'lookup' | 'heldFresh' | 'markStale'>
  upstream: Pick<UpstreamClient, 'profile' | 'timeline' | 'refusesNow' | 'wouldRefuse'>
  keyPrefix: string
  /** A caller's wait (a batch's members not started by its end are not looked up), and its time, for the 504's message. */
  budget: Pick<LoadBudget, 'callerWaitMs' | 'callerMs'>
  freshness: FreshnessPolicy
  now: () => number
  /** For the freshness jitter (tests pin it). */
  random?: () => number
}

export type User = Record<ProfileField, string>

/**
 * What the routes ask for, in their terms: a member's profile or timeline, served through the cache,
 * at once when this process holds it fresh (a value), else as a promise. An upstream 404 becomes a
 * negative entry, cached like any other. `signal` aborts when the caller goes away; `arrival` is when its request
 * came, which its time counts from.
 */
export class Lookups {
  readonly #options: LookupsOptions
  readonly #random: () => number
  /** A profile entry's parsed `user`, so that field queries on one entry parse it once. */
  readonly #users = new WeakMap<CacheEntry, User>()
  /** Made once, shared by every lookup's load. */
  readonly #wouldRefuse = (priority: Priority, deadlineAt: number): boolean => this.#options.upstream.wouldRefuse(priority, deadlineAt)

  constructor (options: LookupsOptions) {
    this.#options = options
    this.#random = options.random ?? Math.random
  }

  /** A field query is answered from this too: a miss loads the whole profile, which then serves all ten fields. */
  profile (username: string, signal?: AbortSignal, arrival?: Arrival): Served | Promise<Served> {
    return this.#lookup('profile', username, signal, arrival)
  }

  timeline (username: string, signal?: AbortSignal, arrival?: Arrival): Served | Promise<Served> {
    return this.#lookup('timeline', username, signal, arrival)
  }

  /**
   * Several members' profiles, each as `profile` serves it; a failure is that member's answer, not the others'. A member
   * not started by the end of the caller's wait is answered at once: fresh from this process, else 504.
   */
  async profiles (usernames: readonly string[], concurrency: number, signal?: AbortSignal, arrival?: Arrival): Promise<Array<PromiseSettledResult<Served>>> {
    const { callerWaitMs, callerMs } = this.#options.budget
    // At most `concurrency` at once, so one batch never overflows the upstream client's bounded queue.
    return await pMap(usernames, async (username): Promise<PromiseSettledResult<Served>> => {
      try {
        // Past the wait, a member costs no store read: one after another they kept the caller well past its time.
        const served = (arrival?.elapsedTime ?? 0) < callerWaitMs ? await this.profile(username, signal, arrival) : this.#heldFresh('profile', username)
        if (served === undefined) throw new UPSTREAM_TIMEOUT(callerMs)
        return { status: 'fulfilled', value: served }
      } catch (reason) {
        return { status: 'rejected', reason }
      }
    }, { concurrency })
  }

  /** Admin purge: the member's profile and timeline entries (negative ones too) become stale. */
  async purge (username: string): Promise<number> {
    return await this.#options.cache.markStale(RESOURCES.map((kind) => cacheKey(this.#options.keyPrefix, kind, username)))
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

  /** One field of a profile entry: its one-key body, and a tag derived from the profile's (it changes exactly when the profile does). */
  fieldOf (entry: CacheEntry, field: ProfileField): Representation {
    return { body: JSON.stringify({ [field]: this.userOf(entry)[field] }), etag: `${entry.etag.slice(0, -1)}.${field}"` }
  }

  #lookup (kind: Resource, username: string, signal: AbortSignal | undefined, arrival: Arrival | undefined): Served | Promise<Served> {
    return this.#options.cache.lookup(cacheKey(this.#options.keyPrefix, kind, username), kind, this.#loadOf(kind, username), signal, arrival)
  }

  #heldFresh (kind: Resource, username: string): Served | undefined {
    return this.#options.cache.heldFresh(cacheKey(this.#options.keyPrefix, kind, username), kind, this.#loadOf(kind, username))
  }

  #loadOf (kind: Resource, username: string): Load {
    const { upstream } = this.#options
    return Object.assign(async (loadSignal: AbortSignal, priority: Priority, deadlineAt: number) =>
      await this.#load(kind, username, loadSignal, priority, deadlineAt), {
      // Asked before the cache takes a lock: a refused miss costs no more than the read that found nothing to serve.
      refusesNow: (priority: Priority, deadlineAt: number) => upstream.refusesNow(kind, priority, deadlineAt),
      wouldRefuse: this.#wouldRefuse
    })
  }

  async #load (kind: Resource, username: string, signal: AbortSignal, priority: Priority, deadlineAt: number | undefined): Promise<CacheEntry> {
    const { upstream, freshness, now } = this.#options
    const answer: UpstreamAnswer<unknown> = kind === 'profile'
      ? await upstream.profile(username, signal, priority, deadlineAt)
      : await upstream.timeline(username, signal, priority, deadlineAt)
    return answer.found
      ? createEntry(200, JSON.stringify(answer.body), now(), freshness[kind], this.#random)
      : createEntry(404, '', now(), freshness.notFound, this.#random)
  }
}
