// The request messages of envd's Connect services (proto3 JSON, as the E2B clients send them),
// checked before a handler sees them; unknown fields pass, as proto3 readers let them.
import { EnvVars, SandboxPath } from '@forkbox/protocol'
import { z } from 'zod'

const Size = z.object({ cols: z.number().int().optional(), rows: z.number().int().optional() }).passthrough()
const Pty = z.object({ size: Size.nullish() }).passthrough()

export const ProcessConfig = z
  .object({
    cmd: z.string().default(''),
    args: z.array(z.string()).default([]),
    // commands and terminals alike: a name execve cannot take would fail inside the sandbox
    envs: EnvVars.default({}),
    cwd: z
      .string()
      .optional()
      .transform((v) => v || undefined),
  })
  .passthrough()
export type ProcessConfig = z.output<typeof ProcessConfig>

/** Which process a call is about: envd selects by pid or tag (tags are not kept here). */
const Selector = z.object({ pid: z.number().int().optional(), tag: z.string().optional() }).passthrough()

export const StartRequest = z
  .object({ process: ProcessConfig, pty: Pty.optional(), stdin: z.boolean().optional() })
  .passthrough()
export const ConnectRequest = z.object({ process: Selector }).passthrough()
export const ListRequest = z.object({}).passthrough()
/** A method not served: its message only has to be a JSON object. */
export const UnservedRequest = z.object({}).passthrough()
export const SendInputRequest = z
  .object({
    process: Selector,
    input: z.object({ stdin: z.string().optional(), pty: z.string().optional() }).passthrough().default({}),
  })
  .passthrough()
export const SendSignalRequest = z
  .object({ process: Selector, signal: z.union([z.string(), z.number()]).optional() })
  .passthrough()
export const CloseStdinRequest = z.object({ process: Selector }).passthrough()
export const UpdateRequest = z.object({ process: Selector, pty: Pty.nullish() }).passthrough()

export const PathRequest = z.object({ path: SandboxPath }).passthrough()
export const MoveRequest = z.object({ source: SandboxPath, destination: SandboxPath }).passthrough()
export const WatchDirRequest = z
  .object({
    path: SandboxPath,
    recursive: z.boolean().default(false),
    includeEntry: z.boolean().default(false),
    allowNetworkMounts: z.boolean().optional(),
  })
  .passthrough()
export const WatcherRequest = z.object({ watcherId: z.string().min(1).max(64) }).passthrough()
export const ListDirRequest = z.object({ path: SandboxPath, depth: z.number().int().optional() }).passthrough()
