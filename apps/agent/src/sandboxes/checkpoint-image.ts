// A running sandbox's image written by runsc checkpoint (beside its target, then renamed): what a
// snapshot, a hibernate and a template bake all do; the Checkpoints room and the baker both use it.
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { AppError } from '@forkbox/protocol'
import { limitCpu } from '../runtime/cgroups.ts'
import { type RunscOptions, runscCheckpoint } from '../runtime/runsc.ts'
import { freeBytesOf } from '../templates/build-disk.ts'
import type { LiveSandbox } from './live-sandbox.ts'

/** Below this free on an image's disk, a failed checkpoint is taken for a full disk. */
const LOW_SPACE_BYTES = 16 * 1024 * 1024

/** Whether `dir`'s disk has less than LOW_SPACE_BYTES free (one that cannot be asked is not taken for full). */
function lowOnSpace(dir: string): boolean {
  try {
    return freeBytesOf(dir) < LOW_SPACE_BYTES
  } catch {
    return false
  }
}

/**
 * Writes `sbx`'s image beside `target` and renames it there: a half-written one is never restored.
 * A target that appeared meanwhile (a content-addressed bake by another process) is kept.
 */
export async function checkpointTo(
  runsc: RunscOptions,
  sbx: LiveSandbox,
  target: string,
  leaveRunning: boolean,
): Promise<{ sizeBytes: number }> {
  const tmp = `${target}.tmp-${process.pid}`
  mkdirSync(tmp, { recursive: true })
  limitCpu(sbx.cgroup, null)
  sbx.checkpointing++
  try {
    await runscCheckpoint(runsc, sbx.container, tmp, { leaveRunning })
    if (existsSync(target)) rmSync(tmp, { recursive: true, force: true })
    else renameSync(tmp, target)
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true })
    const message = err instanceof Error ? err.message : String(err)
    // the image's disk filled up: that, not an internal fault, is what the caller is told
    if (/no space left|ENOSPC/i.test(message) || lowOnSpace(dirname(target)))
      throw new AppError('NO_SPACE', `no room for the image of ${sbx.id} on the host's data disk`)
    throw new AppError('INTERNAL', `checkpoint of ${sbx.id} failed: ${message}`)
  } finally {
    sbx.checkpointing--
    if (!sbx.stopping) limitCpu(sbx.cgroup, sbx.vcpus)
  }
  let sizeBytes = 0
  for (const f of readdirSync(target)) sizeBytes += statSync(join(target, f)).size
  return { sizeBytes }
}

/** Checkpoints `sbx` into `target` and waits for it to stop: an exit that is expected, not an error. */
export async function checkpointAndStop(
  runsc: RunscOptions,
  sbx: LiveSandbox,
  target: string,
): Promise<{ sizeBytes: number }> {
  sbx.stopping = true
  try {
    const size = await checkpointTo(runsc, sbx, target, false)
    await sbx.exited
    return size
  } catch (err) {
    sbx.stopping = false
    limitCpu(sbx.cgroup, sbx.vcpus)
    throw err
  }
}
