// Every operation of the guest's op families has a service method serving it: a family gaining an
// op with none fails to compile (the `@ts-expect-error` lines below fail the typecheck if it did
// compile), and each named method exists.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { FileEntry, GuestContextOps, GuestFileOps, GuestProcessOps } from '@forkbox/protocol'
import { CodeService, contextOpsServed } from '../src/services/code.ts'
import { ExecService, processOpsServed } from '../src/services/exec.ts'
import { FileService, fileOpsServed } from '../src/services/files.ts'
import type { ServedBy } from '../src/services/guest-ops-served.ts'

describe('guest ops served', () => {
  it('each op of each family names a method of its service', () => {
    const families: [Record<string, string>, object][] = [
      [fileOpsServed, FileService.prototype],
      [processOpsServed, ExecService.prototype],
      [contextOpsServed, CodeService.prototype],
    ]
    for (const [served, proto] of families)
      for (const [op, method] of Object.entries(served))
        assert.equal(typeof (proto as Record<string, unknown>)[method], 'function', `${op} → ${method}`)
  })

  it('an op added to a family without a service method does not compile', () => {
    type WithChmod = GuestFileOps & { chmod: { req: { path: string; mode: number }; res: FileEntry } }
    // @ts-expect-error chmod has no FileService method
    const files: ServedBy<WithChmod, FileService> = fileOpsServed
    type WithKill = GuestProcessOps & { proc_kill: { req: { pid: number }; res: object } }
    // @ts-expect-error proc_kill has no ExecService method
    const procs: ServedBy<WithKill, ExecService> = processOpsServed
    type WithRename = GuestContextOps & { context_rename: { req: { context: string }; res: object } }
    // @ts-expect-error context_rename has no CodeService method
    const contexts: ServedBy<WithRename, CodeService> = contextOpsServed
    // and the families as they are do compile
    const ok: [ServedBy<GuestFileOps, FileService>, ServedBy<GuestProcessOps, ExecService>] = [
      fileOpsServed,
      processOpsServed,
    ]
    assert.equal([files, procs, contexts, ok].length, 4)
  })
})
