// A sandbox's network: the user-facing `NetworkPolicy` record (what it may reach, which ports it
// exposes) resolved from the `NetworkOptions` asked for, and the `EgressPolicy` the host enforces.
import { AppError, type EgressPolicy, type NetworkOptions, type NetworkPolicy } from '@forkbox/protocol'

const NO_NETWORK: NetworkPolicy = { internet: false, allowOut: [], denyOut: [], ports: [] }

/** `asked` over `current`: fields not given keep their value, so one change never moves another. */
export function resolveNetwork(asked: NetworkOptions, current: NetworkPolicy = NO_NETWORK): NetworkPolicy {
  const next: NetworkPolicy = {
    internet: asked.internet ?? current.internet,
    allowOut: [...new Set(asked.allowOut ?? current.allowOut)],
    denyOut: [...new Set(asked.denyOut ?? current.denyOut)],
    ports: [...new Set(asked.ports ?? current.ports)].sort((a, b) => a - b),
  }
  if (!next.internet && ((asked.allowOut?.length ?? 0) > 0 || (asked.denyOut?.length ?? 0) > 0))
    throw new AppError(
      'VALIDATION_FAILED',
      'allowOut and denyOut only apply to a sandbox with internet: true; pass internet: true with them',
      { field: 'network' },
    )
  return next
}

/** The part of the record the host enforces (exposed ports are the control plane's). */
export function egressOf(n: NetworkPolicy): EgressPolicy {
  return { internet: n.internet, allowOut: n.allowOut, denyOut: n.denyOut }
}
