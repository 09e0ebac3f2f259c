import { FileUrl, FileUrlRequest } from '@forkbox/protocol'
import { createRoute } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'post',
  path: '/v1/sandboxes/{id}/files/url',
  tags: tagged('Files'),
  summary: 'A signed URL that reads (GET) or writes (PUT, raw body) one file, with no key, until it expires',
  description:
    'For a browser or another service that must not hold the API key: the URL is valid for this ' +
    'sandbox, this path, this operation and this user only, until `expiresAt` (default 1 hour, at most ' +
    '7 days), and stops working when the key that owns the sandbox is revoked. Answers to it allow any ' +
    'origin (CORS). A wrong, altered or expired URL is UNAUTHENTICATED.',
  security,
  request: {
    params: SandboxIdParam,
    body: { content: { 'application/json': { schema: FileUrlRequest } }, required: true },
  },
  responses: {
    200: { description: 'The URL', content: { 'application/json': { schema: FileUrl } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const { id } = c.req.valid('param')
    const body = c.req.valid('json')
    await c.var.services.sandboxes.check(c.var.principal.keyId, id)
    const expires = Math.floor(Date.now() / 1000) + body.expiresInSeconds
    const signed = { sandboxId: id, operation: body.operation, path: body.path, user: body.user, expires }
    const query = new URLSearchParams({ path: body.path, ...(body.user ? { user: body.user } : {}) })
    query.set('expires', String(expires))
    query.set('signature', c.var.services.auth.fileSignature(signed))
    const path = `/v1/sandboxes/${encodeURIComponent(id)}/files?${query}`
    return c.json(
      { url: new URL(path, c.req.url).toString(), path, expiresAt: new Date(expires * 1000).toISOString() },
      200,
    )
  })
}
