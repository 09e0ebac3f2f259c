// E2B's egress settings ↔ forkbox's network policy. E2B: internet on unless denied, `denyOut`
// blocks, `allowOut` wins over `denyOut` (so `denyOut: ['0.0.0.0/0']` + `allowOut` is an
// allow-list). forkbox: closed unless `internet`, `allowOut` narrows, `denyOut` always wins.
import { AppError, type NetworkOptions, type NetworkPolicy } from '@forkbox/protocol'
import { z } from 'zod'

const ALL = '0.0.0.0/0'

export const E2bNetwork = z
  .object({
    allowOut: z.array(z.string()).nullish(),
    denyOut: z.array(z.string()).nullish(),
    rules: z.record(z.string(), z.unknown()).nullish(),
    egressProxy: z.unknown().optional(),
  })
  .passthrough()
export type E2bNetwork = z.output<typeof E2bNetwork>

/**
 * The forkbox policy for what an E2B client asked. `undefined` when it asked nothing, which at
 * create keeps forkbox's default (no network; E2B's default is open, docs/e2b.md says so).
 */
export function toForkbox(allowInternet: boolean | null | undefined, net: E2bNetwork | null | undefined) {
  if (net?.rules && Object.keys(net.rules).length > 0)
    throw new AppError('NOT_IMPLEMENTED', 'network rules (header transforms) are not supported by forkbox')
  if (net?.egressProxy != null) throw new AppError('NOT_IMPLEMENTED', 'egressProxy is not supported by forkbox')
  const allowOut = net?.allowOut ?? []
  const denyOut = (net?.denyOut ?? []).filter((d) => !allowOut.includes(d))
  if (allowInternet === false || denyOut.includes(ALL)) {
    if (allowOut.length === 0) return { internet: false, allowOut: [], denyOut: [] } satisfies NetworkOptions
    return { internet: true, allowOut, denyOut: denyOut.filter((d) => d !== ALL) } satisfies NetworkOptions
  }
  if (allowInternet === true || net) return { internet: true, allowOut: [], denyOut } satisfies NetworkOptions
  return undefined
}

/** What GET /sandboxes/{id} reports: forkbox's policy in E2B's terms. */
export function toE2b(policy: NetworkPolicy) {
  if (!policy.internet) return { allowInternetAccess: false, network: { allowOut: [], denyOut: [ALL] } }
  const denyOut = policy.allowOut.length > 0 ? [ALL, ...policy.denyOut] : policy.denyOut
  return { allowInternetAccess: true, network: { allowOut: policy.allowOut, denyOut } }
}
