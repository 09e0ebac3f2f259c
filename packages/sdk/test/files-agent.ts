// The server tests' FakeAgent with an in-memory file tree per sandbox, so the files routes answer
// with real entries.
import { type AgentSandbox, AppError, type FileEntry, type GuestFileOp, type GuestFileOps } from '@forkbox/protocol'
import { FakeAgent } from '../../../apps/server/test/fake-agent.ts'

interface Stored {
  type: 'file' | 'dir'
  bytes: Uint8Array
  mode: number
}

export class FilesAgent extends FakeAgent {
  readonly files = new Map<string, Map<string, Stored>>()

  #tree(id: string): Map<string, Stored> {
    let tree = this.files.get(id)
    if (!tree) {
      tree = new Map([['/home/user', { type: 'dir', bytes: new Uint8Array(), mode: 0o755 }]])
      this.files.set(id, tree)
    }
    return tree
  }

  #entry(path: string, f: Stored): FileEntry {
    return {
      name: path.split('/').pop() ?? '',
      path,
      type: f.type,
      size: f.bytes.length,
      mode: f.mode,
      mtimeMs: 1,
      uid: 1000,
      gid: 1000,
    }
  }

  #get(id: string, path: string): Stored {
    const f = this.#tree(id).get(path)
    if (!f) throw new AppError('FILE_NOT_FOUND', `no such file: ${path}`)
    return f
  }

  protected override guestOf(id: string): AgentSandbox {
    const files: Pick<AgentSandbox, 'readFile' | 'writeFile' | 'fileOp'> = {
      readFile: (path) => this.#readFile(id, path),
      writeFile: (path, body, opts) => this.#writeFile(id, path, body, opts),
      // the switch narrows `op`, not `R`: its answer is the op's result type by construction
      fileOp: async <R extends GuestFileOp>(op: R) => this.#fileOp(id, op) as GuestFileOps[R['op']]['res'],
    }
    return Object.assign(super.guestOf(id), files)
  }

  async #readFile(id: string, path: string): Promise<{ size: number; stream: ReadableStream<Uint8Array> }> {
    const f = this.#get(id, path)
    const bytes = f.bytes
    return {
      size: bytes.length,
      stream: new ReadableStream({
        start(controller) {
          controller.enqueue(bytes)
          controller.close()
        },
      }),
    }
  }

  async #writeFile(
    id: string,
    path: string,
    body: AsyncIterable<Uint8Array>,
    opts: { mode?: number } = {},
  ): Promise<FileEntry> {
    const chunks: Uint8Array[] = []
    for await (const c of body) chunks.push(c)
    const f: Stored = { type: 'file', bytes: new Uint8Array(Buffer.concat(chunks)), mode: opts.mode ?? 0o644 }
    this.#tree(id).set(path, f)
    return this.#entry(path, f)
  }

  #fileOp(id: string, op: GuestFileOp): GuestFileOps[GuestFileOp['op']]['res'] {
    const tree = this.#tree(id)
    switch (op.op) {
      case 'usage':
        return { usedBytes: 0 }
      case 'stat':
        return this.#entry(op.path, this.#get(id, op.path))
      case 'list':
        return [...tree]
          .filter(([p]) => p.startsWith(`${op.path}/`) && p.slice(op.path.length + 1).split('/').length <= op.depth)
          .map(([p, f]) => this.#entry(p, f))
      case 'mkdir': {
        const f: Stored = { type: 'dir', bytes: new Uint8Array(), mode: 0o755 }
        tree.set(op.path, f)
        return this.#entry(op.path, f)
      }
      case 'rename': {
        const f = this.#get(id, op.from)
        tree.delete(op.from)
        tree.set(op.to, f)
        return this.#entry(op.to, f)
      }
      case 'remove':
        this.#get(id, op.path)
        tree.delete(op.path)
        return {}
    }
  }
}
