// `forkbox mcp`: forkbox's tools for MCP clients, over stdio (default) or streamable HTTP.
import type { Command } from 'commander'
import type { CliContext } from '../context.ts'

export function registerMcp(program: Command, ctx: CliContext): void {
  program
    .command('mcp')
    .description('serve forkbox as an MCP server: stdio by default, or streamable HTTP at /mcp with --http')
    .option('--http <port>', 'serve streamable HTTP on this port instead of stdio')
    .option('--host <host>', 'address for --http', '127.0.0.1')
    .action(async (opts: { http?: string; host: string }) => {
      const mcp = await import('@forkbox/mcp')
      if (!opts.http) {
        await mcp.serveStdio(ctx.connection)
        // runs until the client closes stdin
        await new Promise<void>((resolve) => process.stdin.on('close', resolve))
        return
      }
      const server = await mcp.serveHttp(Number(opts.http), opts.host, ctx.connection)
      ctx.stderr.write(`forkbox MCP server on http://${opts.host}:${opts.http}/mcp\n`)
      await new Promise<void>((resolve) => ctx.onInterrupt(() => server.close(() => resolve())))
    })
}
