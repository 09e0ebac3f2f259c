// A forkbox sandbox as the control plane's answers describe it: what the list and GET return, and
// what create, connect and fork return (how to reach its envd).
import type { Sandbox } from '@forkbox/protocol'
import type { Context } from 'hono'
import type { AppEnv } from '../http/env.ts'
import { accessToken } from './auth.ts'
import { toE2b } from './network.ts'
import { e2bTemplateId } from './template-ids.ts'

/**
 * The envd version the clients are told: ≥ 0.4.0 (no username sent for the default user),
 * ≥ 0.5.2 (closeStdin), ≥ 0.5.7 (octet-stream uploads), ≥ 0.6.2 (file metadata), ≥ 0.6.3 (the
 * entry with a watch event). Not 0.6.4: watches on network mounts (there are none to watch).
 */
export const ENVD_VERSION = '0.6.3'

/** What GET /sandboxes/{id} and the list return. */
export function info(s: Sandbox) {
  return {
    sandboxID: s.id,
    templateID: e2bTemplateId(s.template),
    alias: s.template,
    clientID: 'forkbox',
    startedAt: s.createdAt,
    endAt: s.expiresAt,
    cpuCount: s.resources.vcpus,
    memoryMB: s.resources.memoryMB,
    diskSizeMB: s.resources.diskMB,
    metadata: s.metadata,
    state: s.state === 'hibernated' ? 'paused' : 'running',
    envdVersion: ENVD_VERSION,
    // forkbox wakes a hibernated sandbox on any call: auto-resume is always on where pause is
    lifecycle: { onTimeout: s.onTimeout === 'kill' ? 'kill' : 'pause', autoResume: s.onTimeout !== 'kill' },
    ...toE2b(s.network),
  }
}

/** What create, connect and fork return: how to reach the sandbox's envd. */
export function connection(c: Context<AppEnv>, s: Sandbox) {
  const token = accessToken(c, s.id)
  return {
    sandboxID: s.id,
    templateID: e2bTemplateId(s.template),
    alias: s.template,
    clientID: 'forkbox',
    envdVersion: ENVD_VERSION,
    envdAccessToken: token,
    // the interpreter's context calls send only this one
    trafficAccessToken: token,
    // the clients address envd at `49983-{id}.{domain}` unless E2B_SANDBOX_URL says otherwise
    domain: s.domain,
  }
}
