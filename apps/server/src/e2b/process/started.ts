// What this app's E2B layer started in sandboxes: the configs of commands (for List) and the
// terminals (for everything after their Start), by `sandbox:pid`.
import type { PtySession } from '@forkbox/protocol'
import type { ProcessConfig } from '../messages.ts'

/** A terminal a Start opened: whoever is attached gets its output; it lives until it exits. */
export interface Terminal {
  session: PtySession
  config: ProcessConfig
  listeners: Set<(chunk: Uint8Array) => Promise<void>>
  exited: Promise<{ exitCode: number; signal: string | null }>
}

const MAX_CONFIGS = 10_000

/** The key of a process in `Started` (sandbox ids are unique). */
export const keyOf = (sandboxId: string, pid: number) => `${sandboxId}:${pid}`

/** One per app, so two apps in a process never see each other's. */
export class Started {
  readonly configs = new Map<string, ProcessConfig>()
  readonly terminals = new Map<string, Terminal>()

  /** Keeps a command's config for List; entries of sandboxes nobody lists again go, oldest first, past a bound. */
  remember(key: string, config: ProcessConfig): void {
    this.configs.set(key, config)
    for (const old of this.configs.keys()) {
      if (this.configs.size <= MAX_CONFIGS) break
      this.configs.delete(old)
    }
  }
}
