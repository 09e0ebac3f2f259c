// A request's JSON body checked against a schema; an empty body is `{}` (the clients send none for
// some calls), a broken one MALFORMED_JSON, a wrong one VALIDATION_FAILED.
import { AppError } from '@forkbox/protocol'
import type { Context } from 'hono'
import type { z } from 'zod'
import type { AppEnv } from '../http/env.ts'
import { validationError } from '../http/errors.ts'

export async function jsonBody<T extends z.ZodType>(c: Context<AppEnv>, schema: T): Promise<z.output<T>> {
  const text = await c.req.text()
  let json: unknown = {}
  if (text.trim()) {
    try {
      json = JSON.parse(text)
    } catch {
      throw new AppError('MALFORMED_JSON', 'request body is not valid JSON')
    }
  }
  const parsed = schema.safeParse(json)
  if (!parsed.success) throw validationError(parsed.error)
  return parsed.data
}
