// Where a new sandbox goes: a host with room for it, the one that has its template warm first,
// then the least loaded (sandboxes spread out by default).
import type { HostCapacity } from '@forkbox/protocol'
import type { Placed } from './hosts-store.ts'

/** Sandboxes' memory limits may add up to this many times a host's memory (most use far less). */
export const MEMORY_OVERCOMMIT = 1.5

export interface Candidate {
  id: string
  capacity: HostCapacity
  placed: Placed
}

export interface Need {
  vcpus: number
  memoryMB: number
  /** The template it boots from; none for a restore of a snapshot (no pool or bake helps it): load alone decides. */
  template?: string
}

/** How full a host would be with `need` on it (0..1 per dimension; the fullest counts), or null when it has no room. */
function loadWith(c: Candidate, need: Need): number | null {
  const sandboxes = Math.max(c.placed.sandboxes, c.capacity.sandboxes) + 1
  if (sandboxes > c.capacity.maxSandboxes) return null
  const memoryMB = c.placed.memoryMB + need.memoryMB
  const room = (c.capacity.memoryBytes / 1024 / 1024) * MEMORY_OVERCOMMIT
  if (memoryMB > room) return null
  return Math.max(sandboxes / c.capacity.maxSandboxes, memoryMB / room, c.placed.vcpus / (c.capacity.vcpus * 8))
}

/** 2: a pooled sandbox waits there; 1: its snapshot is baked there; 0: it would be built or booted. */
function locality(c: Candidate, template: string | undefined): number {
  if (template === undefined) return 0
  if ((c.capacity.pool[template] ?? 0) > 0) return 2
  return c.capacity.templates.includes(template) ? 1 : 0
}

/** The hosts that can take `need`, best first. */
export function rankHosts(candidates: readonly Candidate[], need: Need): string[] {
  return candidates
    .map((c) => ({ id: c.id, load: loadWith(c, need), near: locality(c, need.template) }))
    .filter((c): c is { id: string; load: number; near: number } => c.load !== null)
    .sort((a, b) => b.near - a.near || a.load - b.load || a.id.localeCompare(b.id))
    .map((c) => c.id)
}
