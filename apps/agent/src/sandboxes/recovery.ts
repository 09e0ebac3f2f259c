// After a restart: takes back the sandboxes a previous agent process left running, and removes
// every container, cgroup, bundle dir, network slot and half-written file no one owns.
import { readdirSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { AppError } from '@forkbox/protocol'
import type { AgentConfig } from '../config.ts'
import { type GuestPipes, hasGuestFifos, openGuestPipes } from '../guest/fifo.ts'
import type { Slot } from '../network/manager.ts'
import { cgroupExists, listCgroups, removeCgroup, thawAll } from '../runtime/cgroups.ts'
import { processAlive } from '../runtime/process.ts'
import { killAll, runscDelete, runscKill, runscList, runscProcesses, runscSignal } from '../runtime/runsc.ts'
import type { Containers } from './containers.ts'
import { BUNDLE_RECORD, type BundleRecord, INTERNAL_ID, READY_TIMEOUT_MS } from './live-sandbox.ts'

/**
 * Takes back the running sandboxes a previous agent process left (see `reattach`), then removes
 * every container, cgroup and bundle dir no live sandbox owns. Returns what it removed.
 */
export async function reconcile(
  containers: Containers,
  config: AgentConfig,
  log: (message: string) => void,
): Promise<string[]> {
  const { runsc, network } = containers
  await containers.networkReady()
  const removed = new Set<string>()
  const owned = containers.containerNames()
  // `runsc list` asks each sandbox for its state, and a frozen one never answers: what a crashed
  // agent left frozen is thawed first (this agent's own it thaws itself, on their next call)
  thawAll(config.cgroupParent, owned)
  for (const c of await runscList(runsc).catch(() => [])) {
    if (owned.has(c.id)) continue
    if (c.status === 'running' && (await reattach(containers, c.id, log))) {
      owned.add(c.id)
      continue
    }
    await runscKill(runsc, c.id)
    await runscDelete(runsc, c.id)
    removed.add(c.id)
  }
  // a start the dead process had begun (a pool restore, say) may not be listed yet and finish
  // later, owned by no one: its runsc processes go now, and any container they registered
  const strays = runscProcesses(runsc).filter((p) => p.container && !owned.has(p.container))
  killAll(strays.map((p) => p.pid))
  for (const c of new Set(strays.map((p) => p.container as string))) {
    await runscDelete(runsc, c)
    removed.add(c)
  }
  // a deleted container's processes take a moment to leave its cgroup
  const deadline = Date.now() + 5000
  for (const name of listCgroups(config.cgroupParent)) {
    if (owned.has(name)) continue
    const path = `${config.cgroupParent}/${name}`
    removeCgroup(path)
    while (cgroupExists(path) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50))
      removeCgroup(path)
    }
    removed.add(name)
  }
  for (const name of readdirSync(containers.sandboxesDir)) {
    if (owned.has(name)) continue
    rmSync(join(containers.sandboxesDir, name), { recursive: true, force: true })
    removed.add(name)
  }
  for (const name of await network.sweep()) removed.add(name)
  await network.prepare()
  // half-written rootfs builds and snapshots of processes that are gone
  for (const name of readdirSync(config.templatesDir)) {
    const owner = /\.(?:tmp|building)-(\d+)/.exec(name)?.[1]
    if (!owner || processAlive(Number(owner))) continue
    rmSync(join(config.templatesDir, name), { recursive: true, force: true })
    removed.add(name)
  }
  return [...removed]
}

/**
 * Takes back a container a previous agent process started (its guest is reached again through
 * the bundle's FIFOs). False when it cannot be re-attached.
 */
async function reattach(containers: Containers, container: string, log: (message: string) => void): Promise<boolean> {
  const dir = join(containers.sandboxesDir, container)
  let record: BundleRecord
  try {
    record = JSON.parse(readFileSync(join(dir, BUNDLE_RECORD), 'utf8')) as BundleRecord
  } catch {
    return false
  }
  // pooled and baking sandboxes are cheaper to make again than to adopt
  if (!hasGuestFifos(dir) || INTERNAL_ID.test(record.id) || containers.has(record.id)) return false
  let pipes: GuestPipes
  try {
    pipes = openGuestPipes(dir)
  } catch {
    return false
  }
  let slot: Slot
  try {
    slot = await containers.network.adopt(record.slot, record.network)
  } catch (err) {
    log(`cannot take back the network of ${record.id}: ${String(err)}`)
    pipes.input.destroy()
    pipes.output.destroy()
    return false
  }
  // (thawed by `reconcile` before: a frozen guest would never answer the resync)
  const sbx = containers.register(record.id, container, record.vcpus, slot, pipes, { resync: true })
  const timer = setTimeout(
    () => sbx.conn.fail(new AppError('INTERNAL', 'the guest did not answer the resync')),
    READY_TIMEOUT_MS / 3,
  )
  try {
    // the guest drops what the old agent left half-sent, then marks the stream with `resynced`
    await runscSignal(containers.runsc, container, 'USR2')
    await sbx.conn.ready
    await sbx.conn.call({ op: 'ping' })
    return true
  } catch (err) {
    log(`cannot re-attach ${record.id}: ${String(err)}`)
    sbx.stopping = true
    pipes.input.destroy()
    pipes.output.destroy()
    containers.forget(sbx)
    await containers.network.release(slot)
    return false
  } finally {
    clearTimeout(timer)
  }
}
