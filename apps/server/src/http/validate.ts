// Validation for routes registered outside app.openapi (raw byte bodies and responses).
import type { z } from 'zod'
import { validationError } from './errors.ts'

export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const r = schema.safeParse(value)
  if (!r.success) throw validationError(r.error)
  return r.data
}
