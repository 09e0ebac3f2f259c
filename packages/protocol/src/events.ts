// Lifecycle events of sandboxes: the one definition the server records and streams and the SDKs read.
import { z } from 'zod'

/** Every type of event the server records; added to, never renamed (clients filter on them). */
export const sandboxEventTypes = [
  'created',
  'started',
  'errored',
  'lost',
  're-attached',
  'exec-started',
  'exec-ended',
  'pty-opened',
  'snapshotted',
  'forked',
  'forked-from',
  'idle',
  'frozen',
  'thawed',
  'hibernated',
  'woke',
  'timeout-extended',
  'network-updated',
  'killed',
  'idle-killed',
  'expired',
] as const

export const SandboxEventType = z.enum(sandboxEventTypes)
export type SandboxEventType = z.infer<typeof SandboxEventType>

export const SandboxEvent = z.object({
  /** Increasing; a client passes the last one seen as `since` to resume. */
  id: z.number().int(),
  sandboxId: z.string(),
  owner: z.string().describe('id of the API key that owns the sandbox'),
  type: SandboxEventType,
  at: z.string(),
  detail: z.string().nullable(),
})
export type SandboxEvent = z.infer<typeof SandboxEvent>
