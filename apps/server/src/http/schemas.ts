// Shared OpenAPI pieces for the route files.
import { ErrorBody, type ErrorCode, errorCodes, errorStatus } from '@forkbox/protocol'
import { z } from '@hono/zod-openapi'

export const SandboxIdParam = z.object({ id: z.string().min(1).max(64) })

/**
 * Every error the API answers, by status: the description names each code a status carries (from
 * the one registry, errors.ts), so the reference lists all of them; the example is the body's shape.
 */
type ErrorStatus = (typeof errorStatus)[keyof typeof errorStatus]
/** The error body, once in the document's components: each operation's responses refer to it. */
const NamedErrorBody = ErrorBody.meta({ id: 'Error' })
interface ErrorResponse {
  description: string
  content: { 'application/json': { schema: typeof ErrorBody; example: ErrorBody } }
}

function errorResponsesOf(): Record<ErrorStatus, ErrorResponse> {
  const byStatus = new Map<number, ErrorCode[]>()
  for (const code of errorCodes) byStatus.set(errorStatus[code], [...(byStatus.get(errorStatus[code]) ?? []), code])
  const responses: Record<number, ErrorResponse> = {}
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
    const code = codes[0] as ErrorCode
    const example = { error: { code, message: 'what went wrong, in words', requestId: 'req_5f1c9a0b2d3e4f60' } }
    responses[status] = {
      description: `Error: ${codes.map((c) => `\`${c}\``).join(', ')}`,
      content: { 'application/json': { schema: NamedErrorBody, example } },
    }
  }
  // every status of errorStatus is a key: each came from one of its codes
  return responses as Record<ErrorStatus, ErrorResponse>
}

export const errorResponses = errorResponsesOf()

export const security = [{ apiKey: [] }]
