import { callOf, type Interceptor } from './edge-call.ts'

/** Innermost of ours: marks when the call left for the wire (a connection that fails counts as sent). */
export function sent ({ now }: { now: () => number }): Interceptor {
  return (dispatch) => (opts, handler) => {
    callOf(opts).sentAt ??= now()
    return dispatch(opts, handler)
  }
}
