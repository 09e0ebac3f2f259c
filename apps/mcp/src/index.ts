// forkbox as an MCP server: a handful of tools (sandbox lifecycle, code, commands, files) with
// short descriptions, plots returned as image content. Over stdio (`forkbox mcp`) or streamable
// HTTP (`forkbox mcp --http PORT`). It talks to a forkbox server through the TypeScript SDK, with
// the SDK's configuration (FORKBOX_URL, FORKBOX_API_KEY, or the credentials `forkbox up` wrote).
import { createServer, type Server } from 'node:http'
import { type ConnectionOptions, Sandbox } from '@forkbox/sdk'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { z } from 'zod'

type Content = CallToolResult['content']
const MAX_TEXT = 20_000

function clip(text: string): string {
  return text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT)}\n… (${text.length - MAX_TEXT} more characters)` : text
}

function fail(err: unknown): CallToolResult {
  const message = err instanceof Error ? err.message : String(err)
  return { isError: true, content: [{ type: 'text', text: message }] }
}

/** An MCP server whose tools act on sandboxes of the forkbox server `connection` points at. */
export function createForkboxMcp(connection: ConnectionOptions = {}): McpServer {
  const server = new McpServer({ name: 'forkbox', version: '0.1.0' })
  const sandboxes = new Map<string, Sandbox>()
  const sandbox = async (id: string) => {
    let s = sandboxes.get(id)
    if (!s) {
      s = await Sandbox.connect(id, connection)
      sandboxes.set(id, s)
    }
    return s
  }
  const tool = <S extends z.ZodRawShape>(
    name: string,
    description: string,
    inputSchema: S,
    run: (args: z.infer<z.ZodObject<S>>) => Promise<Content>,
  ) =>
    server.registerTool(name, { description, inputSchema }, (async (args: z.infer<z.ZodObject<S>>) => {
      try {
        return { content: await run(args) }
      } catch (err) {
        return fail(err)
      }
    }) as never)

  tool(
    'create_sandbox',
    'Start a sandbox; returns its id. Template code-interpreter (Python data stack) or base.',
    { template: z.string().default('code-interpreter'), ttl_seconds: z.number().int().default(600) },
    async ({ template, ttl_seconds }) => {
      const s = await Sandbox.create({ ...connection, template, ttlSeconds: ttl_seconds })
      sandboxes.set(s.id, s)
      return [{ type: 'text', text: s.id }]
    },
  )
  tool(
    'run_code',
    'Run Python (or bash/javascript/typescript) in the sandbox; state persists between calls. Returns output, the result, plots as images.',
    {
      sandbox_id: z.string(),
      code: z.string(),
      language: z.enum(['python', 'bash', 'javascript', 'typescript']).default('python'),
    },
    async ({ sandbox_id, code, language }) => {
      const e = await (await sandbox(sandbox_id)).runCode(code, { language })
      const parts: Content = []
      const text = [
        e.logs.stdout.join(''),
        e.logs.stderr.join('') && `[stderr]\n${e.logs.stderr.join('')}`,
        ...e.results
          .filter((r) => r.text && !r.png)
          .map((r) => (r.isMainResult ? `[result]\n${r.text}` : (r.text as string))),
        e.error && `[error] ${e.error.name}: ${e.error.value}\n${e.error.traceback}`,
      ]
        .filter(Boolean)
        .join('\n')
      parts.push({ type: 'text', text: clip(text || '(no output)') })
      for (const r of e.results) if (r.png) parts.push({ type: 'image', data: r.png, mimeType: 'image/png' })
      return parts
    },
  )
  tool(
    'run_command',
    'Run a shell command in the sandbox; returns exit code, stdout and stderr.',
    { sandbox_id: z.string(), command: z.string(), timeout_seconds: z.number().default(60) },
    async ({ sandbox_id, command, timeout_seconds }) => {
      const r = await (await sandbox(sandbox_id)).exec(command, { timeoutSeconds: timeout_seconds })
      return [{ type: 'text', text: clip(`exit ${r.exitCode}\n${r.stdout}${r.stderr ? `[stderr]\n${r.stderr}` : ''}`) }]
    },
  )
  tool('read_file', 'Read a text file from the sandbox.', { sandbox_id: z.string(), path: z.string() }, async (a) => [
    { type: 'text', text: clip(await (await sandbox(a.sandbox_id)).files.read(a.path)) },
  ])
  tool(
    'write_file',
    'Write a text file in the sandbox (parents created).',
    { sandbox_id: z.string(), path: z.string(), content: z.string() },
    async ({ sandbox_id, path, content }) => {
      const entry = await (await sandbox(sandbox_id)).files.write(path, content)
      return [{ type: 'text', text: `wrote ${entry.size} bytes to ${entry.path}` }]
    },
  )
  tool(
    'list_files',
    'List a directory in the sandbox.',
    { sandbox_id: z.string(), path: z.string().default('/home/user') },
    async ({ sandbox_id, path }) => {
      const entries = await (await sandbox(sandbox_id)).files.list(path)
      return [
        {
          type: 'text',
          text: entries.map((e) => `${e.type === 'dir' ? 'd' : '-'} ${e.size} ${e.path}`).join('\n') || '(empty)',
        },
      ]
    },
  )
  tool(
    'fork_sandbox',
    'Copy a running sandbox (memory, processes, files) into count new ones; returns their ids.',
    { sandbox_id: z.string(), count: z.number().int().min(1).max(16).default(1) },
    async ({ sandbox_id, count }) => {
      const forks = await (await sandbox(sandbox_id)).fork({ count })
      for (const f of forks) sandboxes.set(f.id, f)
      return [{ type: 'text', text: forks.map((f) => f.id).join('\n') }]
    },
  )
  tool('kill_sandbox', 'Stop a sandbox for good.', { sandbox_id: z.string() }, async ({ sandbox_id }) => {
    await Sandbox.kill(sandbox_id, connection)
    sandboxes.delete(sandbox_id)
    return [{ type: 'text', text: `killed ${sandbox_id}` }]
  })
  return server
}

/** Serves the tools on stdin/stdout until stdin closes. */
export async function serveStdio(connection: ConnectionOptions = {}): Promise<void> {
  await createForkboxMcp(connection).connect(new StdioServerTransport())
}

/** Serves the tools over streamable HTTP at `/mcp` (stateless: each request stands alone). */
export async function serveHttp(port: number, host = '127.0.0.1', connection: ConnectionOptions = {}): Promise<Server> {
  const http = createServer(async (req, res) => {
    if (new URL(req.url ?? '/', 'http://x').pathname !== '/mcp') {
      res.writeHead(404).end()
      return
    }
    const server = createForkboxMcp(connection)
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
    res.on('close', () => {
      void transport.close()
      void server.close()
    })
    await server.connect(transport)
    await transport.handleRequest(req, res)
  })
  await new Promise<void>((resolve) => http.listen(port, host, resolve))
  return http
}
