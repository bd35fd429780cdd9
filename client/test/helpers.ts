import { ProfileBffError } from '../src/index.ts'

/** The error a call fails with (and a failed assertion if it does not fail). */
export async function failure (call: Promise<unknown>): Promise<ProfileBffError> {
  const outcome = await call.then(() => undefined, (error: unknown) => error)
  if (!(outcome instanceof ProfileBffError)) throw new Error(`expected a ProfileBffError, got ${String(outcome)}`)
  return outcome
}

interface Sent { url: string, init: RequestInit | undefined }

/** A fetch test double: records every request, and answers with `respond` (200 `{}` unless told). */
export function fakeFetch (respond: (sent: Sent) => Response | Promise<Response> = () => Response.json({})) {
  const requests: Sent[] = []
  const fetch: typeof globalThis.fetch = async (input, init) => {
    const sent = { url: String(input), init }
    requests.push(sent)
    return await respond(sent)
  }
  return { fetch, requests }
}
