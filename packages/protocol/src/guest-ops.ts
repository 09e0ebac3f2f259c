// The guest operations the agent passes through as they are: for each family, one map from an
// operation to its request and its result, and the schemas the agent checks each result against.
import { z } from 'zod'
import { GuestContextList, GuestEmpty, GuestProcessList } from './guest.ts'
import { CodeContext, FileEntry, ProcessInfo } from './schemas.ts'

/** Bytes used on the sandbox's writable filesystems (/work, /home, /tmp). */
export const GuestDiskUsage = z.object({ usedBytes: z.number().int().min(0) })
export type GuestDiskUsage = z.infer<typeof GuestDiskUsage>

type Empty = z.infer<typeof GuestEmpty>

export interface GuestFileOps {
  usage: { req: object; res: GuestDiskUsage }
  stat: { req: { path: string; user?: string }; res: FileEntry }
  list: { req: { path: string; depth: number; user?: string; metadata?: boolean }; res: FileEntry[] }
  mkdir: { req: { path: string; user?: string }; res: FileEntry }
  remove: { req: { path: string; recursive: boolean; user?: string }; res: Empty }
  rename: { req: { from: string; to: string; user?: string }; res: FileEntry }
}

export interface GuestProcessOps {
  proc_list: { req: object; res: ProcessInfo[] }
  /** `data` is base64. */
  proc_stdin: { req: { pid: number; data?: string; eof?: boolean }; res: Empty }
  proc_signal: { req: { pid: number; signal: string }; res: ProcessInfo }
}

export interface GuestContextOps {
  context_create: { req: { language: string; cwd?: string; env?: Record<string, string> }; res: CodeContext }
  context_list: { req: object; res: CodeContext[] }
  context_restart: { req: { context: string }; res: CodeContext }
  context_remove: { req: { context: string }; res: Empty }
}

/** A family's results by operation (e.g. what a fake agent answers). */
export type OpResults<M> = { [K in keyof M]: M[K] extends { res: infer R } ? R : never }
/** What a family's result schemas must be: one per operation, parsing to its `res`. */
type ResultSchemas<M> = { [K in keyof M]: z.ZodType<OpResults<M>[K]> }

export const guestFileResults: ResultSchemas<GuestFileOps> = {
  usage: GuestDiskUsage,
  stat: FileEntry,
  list: z.array(FileEntry),
  mkdir: FileEntry,
  remove: GuestEmpty,
  rename: FileEntry,
}

export const guestProcessResults: ResultSchemas<GuestProcessOps> = {
  proc_list: GuestProcessList,
  proc_stdin: GuestEmpty,
  proc_signal: ProcessInfo,
}

export const guestContextResults: ResultSchemas<GuestContextOps> = {
  context_create: CodeContext,
  context_list: GuestContextList,
  context_restart: CodeContext,
  context_remove: GuestEmpty,
}

/** A request of a family as sent: its operation's name in `op`, beside its fields. */
export type OpRequest<M> = {
  [K in keyof M & string]: { op: K } & (M[K] extends { req: infer Q } ? Q : never)
}[keyof M & string]

export type GuestFileOp = OpRequest<GuestFileOps>
export type GuestProcessOp = OpRequest<GuestProcessOps>
export type GuestContextOp = OpRequest<GuestContextOps>
