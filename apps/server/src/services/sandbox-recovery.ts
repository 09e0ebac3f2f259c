// After a restart, a host's return or a replica's loss: what the records say against what the
// agents run. Running sandboxes carry on; what was cut short is errored (never half there) or
// hibernated again; what nobody wants is stopped.
import type { AgentApi } from '@forkbox/protocol'
import type { Logger } from 'pino'
import type { SandboxStore } from '../store/sandboxes.ts'
import type { SnapshotStore } from '../store/snapshots.ts'

export interface SandboxRecoveryOptions {
  store: SandboxStore
  agent: AgentApi
  snapshots: SnapshotStore
  log: Logger
  /** Whether this replica is waking the sandbox now (Hibernation.isWaking). */
  isWaking: (id: string) => boolean
}

export class SandboxRecovery {
  constructor(private readonly o: SandboxRecoveryOptions) {}

  /**
   * After a restart: running sandboxes the agent re-attached carry on; one that was still starting
   * (a create or fork cut short) is stopped and errored, never half there; one the agent could not
   * find is errored `lost`; one the records say is gone (killed, or hibernated with its image
   * written) is stopped.
   */
  async recover(): Promise<void> {
    // hibernated sandboxes outlive a restart: their images are kept with the snapshots
    await this.o.agent.pruneSnapshots([...(await this.o.snapshots.ids()), ...(await this.o.store.hibernateSnapshots())])
    const live = new Set(await this.o.agent.liveIds())
    for (const id of await this.o.store.active()) {
      const s = await this.o.store.get(id)
      if (s?.state === 'running' && live.has(id)) {
        await this.o.store.event(id, 're-attached')
        live.delete(id)
        continue
      }
      // a wake cut short: its image is still there, so it is hibernated again (a half-woken
      // container, if any, is stopped below)
      if (s?.state === 'starting' && s.hibernateSnapshot) {
        await this.o.store.claim(id, 'starting', 'hibernated')
        continue
      }
      const starting = s?.state === 'starting'
      await this.o.store.transition(id, ['starting', 'running'], 'errored', 'errored', {
        errorReason: starting ? 'runtime_failed' : 'lost',
        errorMessage: starting
          ? 'the control plane restarted while the sandbox was starting'
          : 'the control plane restarted and the sandbox was not running any more',
      })
    }
    for (const id of live) await this.o.agent.stop(id)
  }

  /**
   * A host (re)joined the fleet: of the sandboxes placed there, those it runs carry on and the
   * rest are errored `lost`; what it runs that no record wants is stopped. Returns the placed ones
   * it no longer runs (to unplace).
   */
  async reconcileHost(
    host: string,
    placed: string[],
    liveIds: string[],
    hostAgent: Pick<AgentApi, 'stop'>,
  ): Promise<string[]> {
    const live = new Set(liveIds)
    const gone: string[] = []
    for (const id of placed) {
      const s = await this.o.store.get(id)
      // being woken onto this host by a replica right now: that replica sees it through
      if (s?.state === 'starting' && s.hibernateSnapshot) {
        live.delete(id)
        continue
      }
      if (s && (s.state === 'running' || s.state === 'starting' || s.state === 'lost') && live.has(id)) {
        if (s.state === 'lost') await this.o.store.transition(id, ['lost'], 'running', 're-attached', {})
        else if (s.state === 'running') await this.o.store.event(id, 're-attached', host)
        live.delete(id)
        continue
      }
      if (live.has(id)) continue
      gone.push(id)
      await this.o.store.transition(id, ['starting', 'running', 'lost'], 'errored', 'errored', {
        errorReason: 'lost',
        errorMessage: `host ${host} restarted and the sandbox was not running any more`,
      })
    }
    // what ended while the host could not be told (a kill while it was lost, say) stops now
    const wasPlaced = new Set(placed)
    for (const id of live) {
      const s = await this.o.store.get(id)
      if (s?.state === 'running' || s?.state === 'starting') continue
      await hostAgent.stop(id)
      if (wasPlaced.has(id)) gone.push(id)
    }
    return gone
  }

  /**
   * Sandboxes left `starting` by a replica that went away mid-create (or mid-wake): a create is
   * errored and whatever its host started is stopped; a wake goes back to hibernated (its image is
   * still there).
   */
  async sweepStuck(olderThanMs: number): Promise<void> {
    for (const { id, waking } of await this.o.store.stuckStarting(new Date(Date.now() - olderThanMs))) {
      if (this.o.isWaking(id)) continue
      if (waking) {
        if (await this.o.store.claim(id, 'starting', 'hibernated')) await this.o.agent.stop(id).catch(() => {})
        continue
      }
      if (
        await this.o.store.transition(id, ['starting'], 'errored', 'errored', {
          errorReason: 'runtime_failed',
          errorMessage: 'the control plane replica that was starting it went away',
        })
      )
        await this.o.agent.stop(id).catch(() => {})
    }
  }

  /** Running sandboxes on hosts that stopped answering are `lost` (until their host is back). */
  async loseAll(host: string, ids: string[]): Promise<void> {
    for (const id of ids)
      if (
        await this.o.store.transition(id, ['starting', 'running'], 'lost', 'lost', {
          errorReason: 'host_unreachable',
          errorMessage: `host ${host} stopped answering`,
        })
      )
        this.o.log.warn({ sandboxId: id, host }, 'sandbox lost with its host')
  }
}
