import type { Request } from './schedule.ts'
import type { Fleet } from './fleet.ts'

// A scheduled request sent to its instance, and what a user sees of the answer.

export interface Answer {
  instance: number
  url: string
  status: number
  code?: string
  cache?: string
  ageS?: number
  maxAgeS?: number
  /** The upstream calls the body's parts came from (indexes into `Fleet.calls`). */
  calls: number[]
  /** When it was sent, on the deployment's clock. */
  sentAt: number
}

const MARK = / r\d+\.(\d+)$/

function urlOf ({ route, usernames, fields = [] }: Request): string {
  const [username = ''] = usernames.map(encodeURIComponent)
  switch (route) {
    case 'profile': return `/profile/${username}`
    case 'timeline': return `/profile/${username}/timeline`
    case 'field': return `/user/${username}?query=${fields.join(',')}`
    case 'batch': {
      const names = usernames.map((name) => `username=${encodeURIComponent(name)}`).join('&')
      return `/profiles?${names}${fields.length > 0 ? `&fields=${fields.join(',')}` : ''}`
    }
  }
}

export async function send (fleet: Fleet, request: Request): Promise<Answer> {
  const url = urlOf(request)
  const sentAt = fleet.now()
  const res = await fleet.instance(request.instance).inject(url)
  const body: unknown = res.json()
  const maxAge = /max-age=(\d+)/.exec(String(res.headers['cache-control'] ?? ''))?.[1]
  return {
    instance: request.instance,
    url,
    status: res.statusCode,
    ...(res.statusCode !== 200 && { code: String((body as { code?: unknown }).code) }),
    ...(res.headers['x-cache'] !== undefined && { cache: String(res.headers['x-cache']) }),
    ...(res.headers.age !== undefined && { ageS: Number(res.headers.age) }),
    ...(maxAge !== undefined && { maxAgeS: Number(maxAge) }),
    calls: [...new Set(marksIn(body))],
    sentAt
  }
}

/** Every call index marked in a body's strings. */
function marksIn (value: unknown): number[] {
  if (typeof value === 'string') {
    const mark = MARK.exec(value)?.[1]
    return mark === undefined ? [] : [Number(mark)]
  }
  if (typeof value === 'object' && value !== null) return Object.values(value).flatMap(marksIn)
  return []
}
