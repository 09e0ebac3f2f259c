// What an envd /files request says in its query: the path (checked as forkbox checks its own) and
// the user.
import { AppError, SandboxPath } from '@forkbox/protocol'
import type { Context } from 'hono'
import type { AppEnv } from '../../http/env.ts'
import type { SandboxCall } from '../sandbox-call.ts'

/** A sandbox path from a request field, checked as forkbox checks its own. */
export function pathOf(value: unknown, field = 'path'): string {
  const parsed = SandboxPath.safeParse(value)
  if (!parsed.success) throw new AppError('INVALID_PATH', `${field}: ${parsed.error.issues[0]?.message ?? 'invalid'}`)
  return parsed.data
}

/** `?username=` wins over the Basic auth user, as in envd. */
export function userOf(c: Context<AppEnv>, call: SandboxCall): string | undefined {
  return c.req.query('username') || call.user
}
