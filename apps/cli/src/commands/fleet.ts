// `forkbox server` and `forkbox agent`: the two processes of a fleet (settings from FORKBOX_* env).
import { writeCredentials } from '@forkbox/sdk'
import type { Command } from 'commander'
import { CliError } from '../cli-error.ts'
import type { CliContext } from '../context.ts'
import { parsePort } from '../parse.ts'
import { lineReporter } from '../progress.ts'

interface ListenFlags {
  port?: number
  host?: string
}

/** Runs `start` until SIGINT/SIGTERM, then closes what it started. */
async function foreground(ctx: CliContext, running: { close(): Promise<void> }, lines: string[]): Promise<void> {
  const stopped = new Promise<void>((resolve) => ctx.onInterrupt(resolve))
  try {
    for (const l of lines) ctx.stdout.write(`${l}\n`)
    await stopped
    ctx.stderr.write('stopping...\n')
  } finally {
    await running.close()
  }
}

export function registerFleet(program: Command, ctx: CliContext): void {
  program
    .command('server')
    .description(
      'run a control-plane replica of a fleet (FORKBOX_DATABASE_URL, FORKBOX_JOIN_TOKEN, FORKBOX_SECRET_FILE)',
    )
    .option('-p, --port <port>', 'port to listen on (default 7411)', parsePort)
    .option('--host <host>', 'address to listen on (default 127.0.0.1)')
    .option(
      '--tls-cert <file>',
      'serve HTTPS with this PEM certificate chain (FORKBOX_TLS_CERT; reloaded when it changes)',
    )
    .option('--tls-key <file>', 'and this PEM key (FORKBOX_TLS_KEY)')
    .action(async (flags: ListenFlags & { tlsCert?: string; tlsKey?: string }) => {
      const { startServerHost } = await ctx.loadHost()
      if (!startServerHost) throw new CliError('HOST_UNAVAILABLE', 'this install has no control-plane server')
      const running = await startServerHost({
        port: flags.port,
        host: flags.host,
        tlsCertFile: flags.tlsCert,
        tlsKeyFile: flags.tlsKey,
      })
      const lines = [`forkbox control plane is up at ${running.url}`]
      if (running.bootstrapKey) {
        const path = writeCredentials({ url: running.url, apiKey: running.bootstrapKey }, ctx.configSource)
        lines.push(`admin API key: saved to ${path}${ctx.stdoutIsTerminal ? ` (${running.bootstrapKey})` : ''}`)
      }
      await foreground(ctx, running, lines)
    })
  program
    .command('agent')
    .description(
      'run this machine as a host of a fleet (FORKBOX_CONTROL_PLANE_URL, FORKBOX_JOIN_TOKEN, FORKBOX_HOST_ID)',
    )
    .option('-p, --port <port>', 'port to serve the control plane on (default 7412)', parsePort)
    .option('--host <host>', 'address to listen on (default 0.0.0.0)')
    .action(async (flags: ListenFlags) => {
      const { startAgentHost } = await ctx.loadHost()
      if (!startAgentHost) throw new CliError('HOST_UNAVAILABLE', 'this install has no host agent')
      const progress = lineReporter(ctx.stderr, ctx.now)
      let running: Awaited<ReturnType<typeof startAgentHost>>
      try {
        running = await startAgentHost({
          port: flags.port,
          host: flags.host,
          onTemplateProgress: (p) => progress.update(p),
        })
      } finally {
        progress.stop()
      }
      await foreground(ctx, running, [`forkbox host ${running.hostId} joined; serving at ${running.url}`])
    })
}
