// The CLI as a library: for tests and for embedding the `forkbox` commands.

export { buildProgram, runCli } from './cli.ts'
export { CliError, formatError } from './cli-error.ts'
export { type CliContext, type Output, processContext } from './context.ts'
export type { HostModule, RunningHost, StartHostOptions, TemplateProgress } from './host.ts'
