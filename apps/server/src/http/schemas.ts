// Shared OpenAPI pieces for the route files.
import { ErrorBody } from '@forkbox/protocol'
import { z } from '@hono/zod-openapi'

export const SandboxIdParam = z.object({ id: z.string().min(1).max(64) })

const errorContent = { 'application/json': { schema: ErrorBody } }

export const errorResponses = {
  400: { description: 'Invalid request', content: errorContent },
  401: { description: 'Missing or unknown API key', content: errorContent },
  404: { description: 'Not found', content: errorContent },
  409: { description: 'Sandbox not running', content: errorContent },
  410: { description: 'Sandbox errored', content: errorContent },
  500: { description: 'Internal error', content: errorContent },
} as const

export const security = [{ apiKey: [] }]
