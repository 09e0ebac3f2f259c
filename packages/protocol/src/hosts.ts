// A fleet's hosts as the control plane sees them: what an agent says when it joins and at each
// heartbeat, and what `GET /v1/hosts` lists.
import { z } from 'zod'

const HOST_ID = /^[a-z0-9][a-z0-9.-]{0,62}$/

/** What a host has and holds, as its agent reports at each heartbeat. */
export const HostCapacity = z.object({
  vcpus: z.number().int().positive(),
  memoryBytes: z.number().int().nonnegative(),
  /** Free bytes on the agent's data disk (snapshots, hibernated sandboxes). */
  diskFreeBytes: z.number().int().nonnegative(),
  /** The most sandboxes it runs at once. */
  maxSandboxes: z.number().int().positive(),
  /** Running now (pool sandboxes not counted). */
  sandboxes: z.number().int().nonnegative(),
  /** Templates with a baked snapshot here (a create from them restores, not boots). */
  templates: z.array(z.string().max(200)).max(10_000),
  /** Restored, unclaimed pool sandboxes by template. */
  pool: z.record(z.string().max(200), z.number().int().nonnegative()),
  /** The shared image store this host mounts (its id: hosts with the same one share images through it). */
  imageStore: z.string().max(100).optional(),
})
export type HostCapacity = z.infer<typeof HostCapacity>

export const JoinHostRequest = z.object({
  /** Stable across restarts (default: the machine's hostname). */
  id: z.string().regex(HOST_ID, 'a host id is lowercase letters, digits, dots and dashes'),
  /** Where the control plane reaches the agent. */
  url: z.string().url().max(500),
  version: z.string().max(100),
  capacity: HostCapacity,
})
export type JoinHostRequest = z.infer<typeof JoinHostRequest>

export const JoinHostResponse = z.object({
  id: z.string(),
  /** The host's own secret: heartbeats present it, and the agent accepts calls only with it. */
  credential: z.string(),
  heartbeatIntervalMs: z.number().int().positive(),
})
export type JoinHostResponse = z.infer<typeof JoinHostResponse>

export const HostHeartbeat = z.object({ capacity: HostCapacity })
export type HostHeartbeat = z.infer<typeof HostHeartbeat>

export const HostState = z.enum(['ready', 'cordoned', 'unreachable'])
export type HostState = z.infer<typeof HostState>

export const Host = z.object({
  id: z.string(),
  url: z.string(),
  /** `unreachable`: no heartbeat within the grace period. */
  state: HostState,
  version: z.string(),
  joinedAt: z.string(),
  lastHeartbeatAt: z.string(),
  capacity: HostCapacity,
  /** What the control plane has placed there. */
  placed: z.object({
    sandboxes: z.number().int(),
    snapshots: z.number().int(),
    vcpus: z.number(),
    memoryMB: z.number().int(),
  }),
})
export type Host = z.infer<typeof Host>
