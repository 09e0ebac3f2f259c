// A code interpreter handler: the call checked for the interpreter's port first.
import type { Context } from 'hono'
import type { AppEnv } from '../../http/env.ts'
import { INTERPRETER_PORT, type SandboxCall, sandboxCall } from '../sandbox-call.ts'

/** An interpreter handler (what it throws goes out E2B-shaped: the layer's onError). */
export const interpreterHandler =
  (fn: (c: Context<AppEnv>, call: SandboxCall) => Promise<Response>) => async (c: Context<AppEnv>) =>
    fn(c, await sandboxCall(c, INTERPRETER_PORT))
