import pino from 'pino'

/** Bytes of log lines gathered before one write: a busy turn's access lines leave in one system call. */
const BUFFERED_BYTES = 4096

/**
 * Standard output off a terminal, through pino's asynchronous destination (sonic-boom): lines are
 * buffered and written together instead of one write per line (every request logs one). What is still
 * buffered at exit is written then; only a process killed outright (SIGKILL) loses it.
 */
export function stdoutDestination (): pino.DestinationStream {
  const destination = pino.destination({ dest: 1, sync: false, minLength: BUFFERED_BYTES })
  process.on('exit', () => { destination.flushSync() })
  return destination
}
