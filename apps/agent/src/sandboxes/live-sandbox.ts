// A sandbox the agent runs: its container, its guest and what a restarted agent needs to take it back.
import type { ChildProcess } from 'node:child_process'
import type { EgressPolicy } from '@forkbox/protocol'
import type { GuestClient } from '../guest/client.ts'
import type { GuestConnection } from '../guest/connection.ts'
import type { GuestPipes } from '../guest/fifo.ts'
import type { Slot } from '../network/manager.ts'

/** Written into each bundle dir: what a restarted agent needs to re-attach the sandbox. */
export const BUNDLE_RECORD = 'forkbox.json'
/** Ids of the agent's own sandboxes: baking a template, building one, or waiting in the warm pool. */
export const INTERNAL_ID = /^(pool|bake|build)-/
export const READY_TIMEOUT_MS = 30_000

export interface BundleRecord {
  id: string
  vcpus: number
  /** Its network slot and egress policy, for a restarted agent to take back. */
  slot: number
  network: EgressPolicy
}

export interface LiveSandbox {
  /** The sandbox id the control plane knows; a pooled sandbox gets one when it is claimed. */
  id: string
  /** runsc container id, also naming its bundle dir and cgroup. */
  container: string
  dir: string
  cgroup: string
  vcpus: number
  slot: Slot
  /** The runsc process we started; null for a sandbox re-attached after a restart. */
  proc: ChildProcess | null
  conn: GuestConnection
  guest: GuestClient
  pipes: GuestPipes
  stopping: boolean
  /**
   * Still starting: its exit is not reported as the sandbox's (its start fails with it, and the
   * caller decides what follows: a template snapshot that will not restore is cold-booted instead).
   */
  starting: boolean
  /** Frozen through its freezer cgroup (idle): any access through `Containers.live` thaws it. */
  frozen: boolean
  /** Checkpoints being written of it now (it is paused meanwhile: the watchdog leaves it be). */
  checkpointing: number
  exited: Promise<void>
}
