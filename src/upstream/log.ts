/**
 * The slice of a pino logger the upstream classes write to: `app.log.child(...)` fits, and unit tests
 * pass `silentLog` or a recorder. Callers log objects (`err`, counts, durations), never a token or secret.
 */
export interface UpstreamLog {
  debug: (details: object, message: string) => void
  info: (details: object, message: string) => void
  warn: (details: object, message: string) => void
}

const ignore = (): void => {}

export const silentLog: UpstreamLog = { debug: ignore, info: ignore, warn: ignore }
