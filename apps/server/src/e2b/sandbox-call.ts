// A call to a service inside a sandbox (envd, the code interpreter): E2B routes these on the
// `E2b-Sandbox-Id` / `E2b-Sandbox-Port` headers, or on the host name `{port}-{id}.{domain}`; the
// caller proves access with the sandbox's token.
import { AppError } from '@forkbox/protocol'
import type { Context } from 'hono'
import type { AppEnv, Services } from '../http/env.ts'
import { requireSandboxAccess } from './auth.ts'

export const ENVD_PORT = 49983
export const INTERPRETER_PORT = 49999

export interface SandboxCall {
  services: Services
  owner: string
  sandboxId: string
  /** The user envd runs as (HTTP Basic `user:`); undefined: the template's default user. */
  user: string | undefined
}

function basicUser(header: string | undefined): string | undefined {
  const m = /^Basic\s+(\S+)$/i.exec(header ?? '')
  if (!m) return undefined
  const user = Buffer.from(m[1] as string, 'base64')
    .toString('utf8')
    .split(':')[0]
  return user || undefined
}

/** The sandbox and caller of an envd or interpreter call, checked. */
export async function sandboxCall(c: Context<AppEnv>, port = ENVD_PORT): Promise<SandboxCall> {
  // on the sandbox's own name (`{port}-{id}.{domain}`) the name says which; else the headers do
  const onHost = c.var.e2bSandbox
  const sandboxId = c.req.header('e2b-sandbox-id') ?? onHost?.id
  if (!sandboxId) throw new AppError('VALIDATION_FAILED', 'the E2b-Sandbox-Id header is required')
  if (onHost && sandboxId !== onHost.id)
    throw new AppError('VALIDATION_FAILED', `the E2b-Sandbox-Id header names another sandbox than the host name`)
  const asked = Number(c.req.header('e2b-sandbox-port') ?? onHost?.port ?? port)
  if (onHost && asked !== onHost.port)
    throw new AppError('VALIDATION_FAILED', `the E2b-Sandbox-Port header names another port than the host name`)
  if (asked !== port)
    throw new AppError('NOT_FOUND', `nothing serves ${c.req.method} ${c.req.path} on port ${asked} of the sandbox`)
  const owner = await requireSandboxAccess(c, sandboxId)
  return { services: c.var.services, owner, sandboxId, user: basicUser(c.req.header('authorization')) }
}
