import { subscribe } from 'node:diagnostics_channel'
import type { AddressInfo } from 'node:net'

// Preloaded into every child of the benchmark (`node --import ./bench/report-port.ts`): the child
// listens on port 0 and sends its parent the port the kernel gave, once, over the IPC channel.
function reportPort ({ server }: { server: { address: () => AddressInfo | string | null } }): void {
  const address = server.address()
  if (typeof address !== 'object' || address === null || process.send === undefined) return
  process.send({ port: address.port })
  // Closed at once: an open channel would keep the child alive after its server closes.
  process.disconnect()
}
subscribe('tracing:net.server.listen:asyncEnd', reportPort as (message: unknown) => void)
