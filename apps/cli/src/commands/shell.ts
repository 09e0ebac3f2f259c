// `forkbox shell`: an interactive terminal in a sandbox (raw mode; the window size follows ours).
import { Sandbox } from '@forkbox/sdk'
import type { Command } from 'commander'
import type { CliContext } from '../context.ts'

export function registerShell(program: Command, ctx: CliContext): void {
  program
    .command('shell')
    .description('open an interactive terminal (a login bash, or CMD) in a sandbox')
    .argument('<id>', 'sandbox id')
    .argument('[cmd...]', 'program to run instead of bash')
    .action(async (id: string, cmd: string[]) => {
      const sandbox = await Sandbox.connect(id, ctx.connection)
      const stdin = process.stdin
      const stdout = process.stdout
      const term = await sandbox.pty.create({
        cols: stdout.columns || 80,
        rows: stdout.rows || 24,
        argv: cmd.length > 0 ? cmd : undefined,
        envs: process.env.TERM ? { TERM: process.env.TERM } : undefined,
        onData: (data) => ctx.stdout.write(data),
      })
      const onResize = () => term.resize(stdout.columns || 80, stdout.rows || 24)
      const onInput = (data: Buffer) => term.sendInput(data)
      if (stdin.isTTY) stdin.setRawMode(true)
      stdin.on('data', onInput)
      stdin.resume()
      process.on('SIGWINCH', onResize)
      try {
        const exit = await term.wait()
        ctx.exitCode = exit.signal ? 128 : exit.exitCode
      } finally {
        process.off('SIGWINCH', onResize)
        stdin.off('data', onInput)
        if (stdin.isTTY) stdin.setRawMode(false)
        stdin.pause()
      }
    })
}
