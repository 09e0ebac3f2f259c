// The `forkbox` executable: runs the CLI on this process and exits once output is flushed.
import { runCli } from './cli.ts'
import { processContext } from './context.ts'

function flush(stream: NodeJS.WriteStream): Promise<void> {
  return new Promise((resolve) => stream.write('', () => resolve()))
}

const code = await runCli(process.argv.slice(2), processContext())
await flush(process.stdout)
await flush(process.stderr)
// Exit explicitly: an idle keep-alive socket must not keep a finished command alive.
process.exit(code)
