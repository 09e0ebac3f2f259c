// Hosts joining, heartbeating, listed and cordoned: the fleet's membership, over the shared store.
import { randomBytes } from 'node:crypto'
import {
  AppError,
  type Host,
  type HostCapacity,
  type HostState,
  type JoinHostRequest,
  type JoinHostResponse,
} from '@forkbox/protocol'
import type { Logger } from 'pino'
import { sameSecret } from '../http/auth.ts'
import { type Fleet, hostCredential } from './fleet.ts'
import type { HostStore } from './hosts-store.ts'

export const HEARTBEAT_INTERVAL_MS = 2_000

export class HostService {
  /** Run after each join, in the background: make the host's templates known, reconcile its sandboxes. */
  onJoined: (hostId: string) => Promise<void> = async () => {}
  /** Moves one running sandbox off its (cordoned) host, live. */
  migrate: (sandboxId: string) => Promise<void> = async () => {}
  /** Tells every replica the hosts changed (a join, a cordon): their cached view is dropped. */
  announce: () => Promise<void> = async () => {}

  constructor(
    private readonly store: HostStore,
    readonly fleet: Fleet,
    private readonly secret: Buffer,
    private readonly joinToken: string | undefined,
    private readonly log: Logger,
  ) {}

  async join(token: string | null, req: JoinHostRequest): Promise<JoinHostResponse> {
    if (!this.joinToken)
      throw new AppError('FORBIDDEN', 'this control plane takes no hosts (FORKBOX_JOIN_TOKEN is unset)')
    if (!token || !sameSecret(token, this.joinToken)) throw new AppError('UNAUTHENTICATED', 'wrong join token')
    const nonce = randomBytes(16).toString('hex')
    await this.store.join(req, nonce)
    this.fleet.forgetHosts()
    await this.announce()
    this.log.info({ host: req.id, url: req.url, version: req.version }, 'host joined')
    setImmediate(() => {
      this.onJoined(req.id).catch((err: unknown) => this.log.error({ err, host: req.id }, 'after a join'))
    })
    return {
      id: req.id,
      credential: hostCredential(this.secret, req.id, nonce),
      heartbeatIntervalMs: HEARTBEAT_INTERVAL_MS,
    }
  }

  /** A heartbeat with the host's credential; an unknown host or a stale credential must join again. */
  async heartbeat(id: string, credential: string | null, capacity: HostCapacity): Promise<void> {
    const row = await this.store.get(id)
    if (!row || !credential || !sameSecret(credential, hostCredential(this.secret, id, row.nonce)))
      throw new AppError('UNAUTHENTICATED', `host ${id} must join again`)
    await this.store.heartbeat(id, capacity)
  }

  async list(): Promise<Host[]> {
    const placed = await this.store.placed()
    return (await this.store.list()).map((r) => {
      const state: HostState = this.fleet.isFresh(r) ? (r.state === 'cordoned' ? 'cordoned' : 'ready') : 'unreachable'
      const p = placed.get(r.id) ?? { sandboxes: 0, snapshots: 0, vcpus: 0, memoryMB: 0 }
      return {
        id: r.id,
        url: r.url,
        state,
        version: r.version,
        joinedAt: r.joined_at,
        lastHeartbeatAt: r.heartbeat_at,
        capacity: JSON.parse(r.capacity) as HostCapacity,
        placed: { ...p, memoryMB: Math.round(p.memoryMB) },
      }
    })
  }

  /**
   * Cordons the host, then moves what it holds elsewhere: running sandboxes live (one at a time,
   * each paused only for its own move), images by copy. What could not move stays and is reported.
   */
  async drain(
    id: string,
  ): Promise<{ migrated: string[]; moved: string[]; failed: { id: string; code: string; message: string }[] }> {
    await this.setState(id, 'cordoned')
    const report = {
      migrated: [] as string[],
      moved: [] as string[],
      failed: [] as { id: string; code: string; message: string }[],
    }
    const failed = (what: string, err: unknown) =>
      report.failed.push({
        id: what,
        code: err instanceof AppError ? err.code : 'INTERNAL',
        message: err instanceof Error ? err.message : String(err),
      })
    for (const sandboxId of await this.store.placedOn(id, 'sandbox'))
      await this.migrate(sandboxId).then(
        () => report.migrated.push(sandboxId),
        (err: unknown) => failed(sandboxId, err),
      )
    for (const snapshotId of await this.store.placedOn(id, 'snapshot')) {
      try {
        const target = await this.fleet.imageTarget(id)
        await this.fleet.moveImage(snapshotId, target)
        report.moved.push(snapshotId)
      } catch (err) {
        failed(snapshotId, err)
      }
    }
    this.log.info({ host: id, ...report }, 'host drained')
    return report
  }

  async setState(id: string, state: 'ready' | 'cordoned'): Promise<Host> {
    if (!(await this.store.setState(id, state))) throw new AppError('NOT_FOUND', `no host ${id}`)
    this.fleet.forgetHosts()
    await this.announce()
    const host = (await this.list()).find((h) => h.id === id)
    if (!host) throw new AppError('NOT_FOUND', `no host ${id}`)
    return host
  }
}
