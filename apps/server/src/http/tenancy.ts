// What every call of a key passes before its route runs (read-only scope, rate limits), and what
// every key and admin action leaves in the audit log.
import { AppError, type KeyRateLimits, type RateClass } from '@forkbox/protocol'
import type { Context, MiddlewareHandler } from 'hono'
import { rateOf } from '../config.ts'
import type { Principal } from '../store/keys.ts'
import type { AppEnv } from './env.ts'

/** Calls that make something (and cost the host): counted apart from the rest. */
const CREATES: readonly RegExp[] = [
  /^\/(v1\/|v2\/)?sandboxes\/?$/,
  /^\/(v1\/)?sandboxes\/[^/]+\/(fork|snapshots)$/,
  /^\/v1\/templates\/?$/,
  /^\/v[23]\/templates(\/[^/]+\/builds\/[^/]+)?$/,
  /^\/sandboxes\/[^/]+\/resume$/,
]

export function rateClass(method: string, path: string): RateClass {
  return method === 'POST' && CREATES.some((r) => r.test(path)) ? 'create' : 'data'
}

/** What a read-only key's write is answered with, wherever it comes in (a key, a token, a signed URL). */
export function readOnlyRefusal(): AppError {
  return new AppError('FORBIDDEN', 'this key is read-only', { scope: 'readOnly' })
}

/**
 * Whether this call changes something: the route group's own rule where it set one (`c.var.writes`:
 * E2B's Connect calls are all POSTs, their method names say), else any method but GET and HEAD,
 * and any upgrade (a terminal, a WebSocket).
 */
export function writes(c: Context<AppEnv>): boolean {
  if (c.req.header('upgrade')) return true
  return c.var.writes ? c.var.writes(c) : c.req.method !== 'GET' && c.req.method !== 'HEAD'
}

/** Refuses the call if it writes and `principal` (the caller's key, or the owner of its token) is read-only. */
export function checkReadOnly(c: Context<AppEnv>, principal: Principal): void {
  if (principal.scopes.readOnly && writes(c)) throw readOnlyRefusal()
}

/**
 * Refuses a read-only key's writes, then takes the call from the key's bucket for its class. A call
 * made with a sandbox's token or signed URL passes here with its owner's key as it stands now.
 */
export async function admitCall(c: Context<AppEnv>, principal: Principal): Promise<void> {
  checkReadOnly(c, principal)
  await takeRate(c, principal.keyId, principal.rateLimits, rateClass(c.req.method, c.req.path))
}

async function takeRate(c: Context<AppEnv>, keyId: string, own: KeyRateLimits, cls: RateClass): Promise<void> {
  const { services } = c.var
  const limit = own[cls] ?? rateOf(cls === 'create' ? services.config.rateLimitCreate : services.config.rateLimitData)
  if (!limit) return
  const taken = await services.rateLimiter.take(`${keyId}:${cls}`, limit)
  if (!taken.ok)
    throw new AppError(
      'RATE_LIMITED',
      `this key makes at most ${limit.perSecond} ${cls} calls a second (${limit.burst} at once): retry in ${Math.ceil(taken.retryAfterMs / 1000)} s`,
      { class: cls, retryAfterMs: taken.retryAfterMs, perSecond: limit.perSecond, burst: limit.burst },
    )
}

type Audited = [method: string, path: RegExp, action: string]

/** The actions the audit log keeps (the first group of the path, when there is one, is the target). */
const AUDITED: readonly Audited[] = [
  ['POST', /^\/v1\/keys$/, 'key.create'],
  ['PATCH', /^\/v1\/keys\/([^/]+)$/, 'key.update'],
  ['DELETE', /^\/v1\/keys\/([^/]+)$/, 'key.revoke'],
  ['POST', /^\/v1\/keys\/([^/]+)\/rotate$/, 'key.rotate'],
  ['POST', /^\/(?:v1\/|v2\/)?sandboxes\/?$/, 'sandbox.create'],
  ['DELETE', /^\/(?:v1\/)?sandboxes\/([^/]+)$/, 'sandbox.kill'],
  ['POST', /^\/(?:v1\/)?sandboxes\/([^/]+)\/fork$/, 'sandbox.fork'],
  ['POST', /^\/v1\/sandboxes\/([^/]+)\/hibernate$/, 'sandbox.hibernate'],
  ['POST', /^\/sandboxes\/([^/]+)\/pause$/, 'sandbox.hibernate'],
  ['POST', /^\/sandboxes\/([^/]+)\/resume$/, 'sandbox.wake'],
  ['POST', /^\/(?:v1\/)?sandboxes\/([^/]+)\/timeout$/, 'sandbox.timeout'],
  ['PUT', /^\/(?:v1\/)?sandboxes\/([^/]+)\/network$/, 'sandbox.network'],
  ['PATCH', /^\/v1\/sandboxes\/([^/]+)\/network$/, 'sandbox.network'],
  ['POST', /^\/(?:v1\/)?sandboxes\/([^/]+)\/snapshots$/, 'snapshot.create'],
  ['DELETE', /^\/v1\/snapshots\/([^/]+)$/, 'snapshot.delete'],
  ['POST', /^\/v1\/templates$/, 'template.create'],
  ['POST', /^\/v3\/templates$/, 'template.create'],
  ['POST', /^\/v2\/templates\/([^/]+)\/builds\/[^/]+$/, 'template.build'],
  ['PUT', /^\/v1\/templates\/by-id\/([^/]+)\/public$/, 'template.publish'],
  ['POST', /^\/v1\/templates\/by-id\/([^/]+)\/public$/, 'template.publish'],
  ['DELETE', /^\/v1\/templates\/by-id\/([^/]+)\/public$/, 'template.unpublish'],
  ['DELETE', /^\/v1\/templates\/([^/]+)$/, 'template.delete'],
  ['DELETE', /^\/templates\/([^/]+)$/, 'template.delete'],
  ['POST', /^\/v1\/templates\/prune$/, 'template.prune'],
  ['PUT', /^\/v1\/registries\/([^/]+)$/, 'registry.set'],
  ['DELETE', /^\/v1\/registries\/([^/]+)$/, 'registry.delete'],
  ['POST', /^\/v1\/hosts\/([^/]+)\/(?:cordon|uncordon|drain)$/, 'host.manage'],
]

function auditedAction(method: string, path: string): { action: string; target: string | null } | null {
  for (const [m, re, action] of AUDITED) {
    if (m !== method) continue
    const hit = re.exec(path)
    if (hit) return { action, target: hit[1] ? decodeURIComponent(hit[1]) : null }
  }
  return null
}

/** What a create's answer names: the new thing's id (and a fork's children). */
async function created(res: Response): Promise<{ target: string | null; detail?: Record<string, unknown> }> {
  if (!/json/.test(res.headers.get('content-type') ?? '')) return { target: null }
  const body = (await res
    .clone()
    .json()
    .catch(() => null)) as Record<string, unknown> | null
  if (!body) return { target: null }
  const id = body.id ?? body.sandboxID ?? body.templateID ?? (body.template as { id?: unknown } | undefined)?.id
  const forks = (body.sandboxes as { id?: unknown }[] | undefined)?.map((s) => s.id)
  return { target: typeof id === 'string' ? id : null, ...(forks && { detail: { forks } }) }
}

/** Middleware: records the audited actions, whatever they ended with (a refusal included). */
export function auditLog(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const hit = auditedAction(c.req.method, c.req.path)
    if (!hit) return next()
    await next()
    const { services } = c.var
    // a create's target (and a fork's children) are in its answer
    const answer =
      c.res.status < 300 && (hit.target === null || hit.action === 'sandbox.fork') ? await created(c.res) : null
    const principal = c.get('principal') as Principal | undefined
    // `me` names the caller's own key
    const target = hit.target ?? answer?.target ?? null
    try {
      await services.audit.append({
        keyId: principal?.keyId ?? null,
        action: hit.action,
        target: target === 'me' && principal ? principal.keyId : target,
        status: c.res.status,
        ip: c.env?.incoming?.socket.remoteAddress ?? null,
        userAgent: c.req.header('user-agent') ?? null,
        requestId: c.var.requestId,
        detail: answer?.detail,
      })
    } catch (err) {
      // the action is done: a failed record is logged loudly, never undone
      services.log.error({ err, action: hit.action, requestId: c.var.requestId }, 'audit record failed')
    }
  }
}
