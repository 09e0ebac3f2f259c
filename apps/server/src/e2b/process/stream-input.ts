// process.Process/StreamInput: not served (a client-streaming call); SendInput does the same.
import { AppError } from '@forkbox/protocol'
import { sandboxUnary } from '../connect.ts'
import { UnservedRequest } from '../messages.ts'
import type { E2bApp } from '../route-module.ts'

export function register(app: E2bApp): void {
  app.post(
    '/process.Process/StreamInput',
    sandboxUnary(UnservedRequest, async () => {
      throw new AppError('NOT_IMPLEMENTED', 'StreamInput is not supported; use SendInput')
    }),
  )
}
