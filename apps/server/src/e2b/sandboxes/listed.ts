// The caller's sandboxes as E2B's list calls filter and order them (?state, ?template,
// ?startedAfter, ?metadata, ?order).
import type { Sandbox } from '@forkbox/protocol'
import type { Context } from 'hono'
import type { AppEnv } from '../../http/env.ts'
import { forkboxTemplate } from '../template-ids.ts'

/** `metadata=k%3Dv%26k2%3Dv2`: the clients percent-encode each key and value, then the whole. */
function metadataFilter(query: string | undefined): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of new URLSearchParams(query ?? '')) out[decodeURIComponent(k)] = decodeURIComponent(v)
  return out
}

export async function listed(c: Context<AppEnv>, owner: string): Promise<Sandbox[]> {
  const states = new Set((c.req.query('state') ?? 'running,paused').split(','))
  const template = c.req.query('template')
  const after = Date.parse(c.req.query('startedAfter') ?? '') || 0
  return (await c.var.services.sandboxes.list(owner, { metadata: metadataFilter(c.req.query('metadata')) }))
    .filter(
      (s) => (s.state === 'running' && states.has('running')) || (s.state === 'hibernated' && states.has('paused')),
    )
    .filter((s) => !template || forkboxTemplate(template) === s.template)
    .filter((s) => Date.parse(s.createdAt) >= after)
    .sort((a, b) => (c.req.query('order') === 'asc' ? 1 : -1) * a.createdAt.localeCompare(b.createdAt))
}
