// A running sandbox's files: read and write as streams, stat, list, make, remove and rename, watch
// a directory, and the disk its writable filesystems use. Every call goes the sandbox-call path.
import type { FileEntry, GuestFileOp, GuestFileOps, WatchEnd, WatchHandlers, WriteOptions } from '@forkbox/protocol'
import type { ServedBy } from './guest-ops-served.ts'
import type { SandboxCalls } from './sandbox-calls.ts'

type Req<K extends keyof GuestFileOps> = GuestFileOps[K]['req']

export interface FileServiceOptions {
  calls: SandboxCalls
}

export class FileService {
  private readonly calls: SandboxCalls

  constructor(o: FileServiceOptions) {
    this.calls = o.calls
  }

  private op<R extends GuestFileOp>(owner: string, id: string, req: R): Promise<GuestFileOps[R['op']]['res']> {
    return this.calls.onSandbox(owner, id, (sbx) => sbx.fileOp(req))
  }

  readFile(owner: string, id: string, path: string, user?: string) {
    return this.calls.onSandbox(owner, id, (sbx) => sbx.readFile(path, user))
  }

  writeFile(
    owner: string,
    id: string,
    path: string,
    body: AsyncIterable<Uint8Array>,
    opts: WriteOptions,
  ): Promise<FileEntry> {
    return this.calls.onSandbox(owner, id, (sbx) => sbx.writeFile(path, body, opts))
  }

  stat(owner: string, id: string, req: Req<'stat'>): Promise<FileEntry> {
    return this.op(owner, id, { op: 'stat', ...req })
  }

  list(owner: string, id: string, req: Req<'list'>): Promise<FileEntry[]> {
    return this.op(owner, id, { op: 'list', ...req })
  }

  mkdir(owner: string, id: string, req: Req<'mkdir'>): Promise<FileEntry> {
    return this.op(owner, id, { op: 'mkdir', ...req })
  }

  async remove(owner: string, id: string, req: Req<'remove'>): Promise<void> {
    await this.op(owner, id, { op: 'remove', ...req })
  }

  rename(owner: string, id: string, req: Req<'rename'>): Promise<FileEntry> {
    return this.op(owner, id, { op: 'rename', ...req })
  }

  /** A directory watch; like an attached stream it counts as activity while it is open. */
  watchDir(
    owner: string,
    id: string,
    req: { path: string; recursive?: boolean; user?: string },
    handlers: WatchHandlers,
    signal?: AbortSignal,
  ): Promise<WatchEnd> {
    return this.calls.onSandbox(owner, id, (sbx) => sbx.watchDir(req, handlers, signal))
  }

  /**
   * Bytes used on the sandbox's writable filesystems (/work, /home, /tmp). A look, not a use: it
   * neither wakes a hibernated sandbox nor counts as activity.
   */
  async diskUsage(owner: string, id: string): Promise<number> {
    const { usedBytes } = await this.calls.peek(owner, id, (sbx) => sbx.fileOp({ op: 'usage' }))
    return usedBytes
  }
}

/** Which method serves each of the guest's file operations (see guest-ops-served.ts). */
export const fileOpsServed = {
  usage: 'diskUsage',
  stat: 'stat',
  list: 'list',
  mkdir: 'mkdir',
  remove: 'remove',
  rename: 'rename',
} as const satisfies ServedBy<GuestFileOps, FileService>
