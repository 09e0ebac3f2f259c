// CLI-side failures and the one format every error is printed in: `forkbox: CODE: message`.
import { ConnectionError, ForkboxError } from '@forkbox/sdk'

export class CliError extends Error {
  readonly code: string

  constructor(code: string, message: string) {
    super(message)
    this.name = 'CliError'
    this.code = code
  }
}

export function formatError(err: unknown): string {
  if (err instanceof ConnectionError) return `forkbox: ${err.code}: ${err.message} (is \`forkbox up\` running?)`
  if (err instanceof ForkboxError) {
    const request = err.status !== undefined && err.status >= 500 && err.requestId ? ` (request ${err.requestId})` : ''
    return `forkbox: ${err.code}: ${err.message}${request}`
  }
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code
    return `forkbox: ${typeof code === 'string' ? code : 'ERROR'}: ${err.message}`
  }
  return `forkbox: ERROR: ${String(err)}`
}
