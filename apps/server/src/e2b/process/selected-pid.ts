// Which process an envd call is about: envd selects by pid or tag; tags are not kept here.
import { AppError } from '@forkbox/protocol'

/** The pid a request's `process` selector names. */
export function selectedPid(req: { process: { pid?: number; tag?: string } }): number {
  const sel = req.process
  if (sel.pid !== undefined) return sel.pid
  if (sel.tag !== undefined) throw new AppError('PROCESS_NOT_FOUND', 'processes are selected by pid; tags are not kept')
  throw new AppError('VALIDATION_FAILED', 'process.pid is required')
}
