// `forkbox up`: runs the control plane and agent in this process until SIGINT/SIGTERM.
import { writeCredentials } from '@forkbox/sdk'
import type { Command } from 'commander'
import type { CliContext } from '../context.ts'
import { parsePort } from '../parse.ts'
import { barReporter, lineReporter } from '../progress.ts'

interface UpFlags {
  port?: number
  host?: string
  supervise: boolean
  tlsCert?: string
  tlsKey?: string
}

export function registerUp(program: Command, ctx: CliContext): void {
  program
    .command('up')
    .description('start forkbox on this machine and stay in the foreground')
    .option('-p, --port <port>', 'port to listen on (default 7411; 0 picks a free one)', parsePort)
    .option('--host <host>', 'address to listen on (default 127.0.0.1)')
    .option('--no-supervise', 'run the host in this process, not restarted if it dies')
    .option(
      '--tls-cert <file>',
      'serve HTTPS with this PEM certificate chain (FORKBOX_TLS_CERT; reloaded when it changes)',
    )
    .option('--tls-key <file>', 'and this PEM key (FORKBOX_TLS_KEY)')
    .action(async (flags: UpFlags) => {
      if (flags.supervise && ctx.supervisor && !ctx.supervisor.inChild) {
        ctx.exitCode = await ctx.supervisor.run()
        return
      }
      ctx.supervisor?.lastResort()
      const { startHost } = await ctx.loadHost()
      const progress = ctx.progressStream ? barReporter(ctx.progressStream) : lineReporter(ctx.stderr, ctx.now)
      let running: Awaited<ReturnType<typeof startHost>>
      try {
        running = await startHost({
          port: flags.port,
          host: flags.host,
          tlsCertFile: flags.tlsCert,
          tlsKeyFile: flags.tlsKey,
          onTemplateProgress: (p) => progress.update(p),
        })
      } finally {
        progress.stop()
      }
      // Subscribe before anything else can fail, so a signal always reaches close().
      const stopped = new Promise<void>((resolve) => {
        ctx.onInterrupt(resolve)
        ctx.supervisor?.onSupervisorGone(() => {
          ctx.stderr.write('the supervisor is gone\n')
          resolve()
        })
      })
      try {
        const path = writeCredentials({ url: running.url, apiKey: running.bootstrapKey ?? undefined }, ctx.configSource)
        ctx.stdout.write(`forkbox is up at ${running.url}\n`)
        if (running.bootstrapKey && ctx.stdoutIsTerminal) {
          ctx.stdout.write(`admin API key: ${running.bootstrapKey}\n`)
          ctx.stdout.write(`(saved to ${path}; it is not shown again)\n`)
        } else if (running.bootstrapKey) {
          // not a terminal: stdout may be a log file, which must not hold the key
          ctx.stdout.write(`admin API key: saved to ${path} (shown only on a terminal)\n`)
        } else {
          ctx.stdout.write(`credentials: ${path}\n`)
        }
        ctx.stdout.write('press Ctrl-C to stop\n')
        await stopped
        ctx.stderr.write('stopping...\n')
      } finally {
        await running.close()
      }
    })
}
