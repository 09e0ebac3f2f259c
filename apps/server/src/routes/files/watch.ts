import { WatchQuery } from '@forkbox/protocol'
import { createRoute, z } from '@hono/zod-openapi'
import type { App } from '../../http/env.ts'
import { errorResponses, SandboxIdParam, security } from '../../http/schemas.ts'
import { type Emit, sseResponse } from '../../http/sse.ts'
import { startWatch } from '../../services/watch.ts'
import { tagged } from '../tags.ts'

const route = createRoute({
  method: 'get',
  path: '/v1/sandboxes/{id}/files/watch',
  tags: tagged('Files'),
  summary: 'Watch a directory for changes, as Server-Sent Events',
  description:
    'Events: `start` ({path}) once the watch is set up: every change from then on is reported; then one ' +
    '`change` per change ({type: create | write | remove | rename | chmod, name: relative to the watched ' +
    'directory ("" for the directory itself), path: absolute}); `overflow` ({reason}) when changes were lost ' +
    "(the sandbox's kernel queue overflowed: list the directory again); `end` ({reason: gone}) when the " +
    'directory is removed or moved away. With `recursive=true` the directories under it are watched too, ' +
    'including those created later. Closing the stream stops the watch. A watch counts as activity ' +
    'while it is open, as an attached output stream does. A missing path is FILE_NOT_FOUND, a file ' +
    'NOT_A_DIRECTORY, both before any event.',
  security,
  request: { params: SandboxIdParam, query: WatchQuery },
  responses: {
    200: { description: 'The changes', content: { 'text/event-stream': { schema: z.string() } } },
    ...errorResponses,
  },
})

export function register(app: App): void {
  app.openapi(route, async (c) => {
    const owner = c.var.principal.keyId
    const { id } = c.req.valid('param')
    const q = c.req.valid('query')
    const files = c.var.services.files
    await c.var.services.sandboxes.check(owner, id)
    const req = { path: q.path, recursive: q.recursive === 'true', user: q.user }
    // the watch is set up (or refused) before the response starts, so a refusal is a plain error;
    // what it reports waits for the stream
    let streamed!: (emit: Emit) => void
    const streaming = new Promise<Emit>((resolve) => {
      streamed = resolve
    })
    const stop = new AbortController()
    const { started, done } = startWatch(
      files,
      owner,
      id,
      req,
      {
        events: async (changes) => {
          const emit = await streaming
          for (const { type, name, path } of changes) await emit('change', { type, name, path })
        },
        overflow: async (reason) => (await streaming)('overflow', { reason }),
      },
      stop.signal,
    )
    const root = await started
    return sseResponse(c, async (emit, signal) => {
      signal.addEventListener('abort', () => stop.abort())
      await emit('start', { path: root })
      streamed(emit)
      const end = await done
      return end.reason === 'stopped' ? null : { event: 'end', data: end }
    })
  })
}
