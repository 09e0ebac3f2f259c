import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { HostCapacity } from '@forkbox/protocol'
import { type Candidate, rankHosts } from '../../src/fleet/placement.ts'

const GiB = 1024 ** 3

function host(id: string, over: Partial<HostCapacity> = {}, placed: Partial<Candidate['placed']> = {}): Candidate {
  return {
    id,
    capacity: {
      vcpus: 2,
      memoryBytes: 8 * GiB,
      diskFreeBytes: 100 * GiB,
      maxSandboxes: 10,
      sandboxes: 0,
      templates: ['base'],
      pool: {},
      ...over,
    },
    placed: { sandboxes: 0, snapshots: 0, vcpus: 0, memoryMB: 0, ...placed },
  }
}

const need = { vcpus: 1, memoryMB: 512, template: 'base' }

describe('placement', () => {
  it('spreads: the least loaded host first', () => {
    assert.deepEqual(
      rankHosts(
        [host('a', {}, { sandboxes: 3, memoryMB: 1536 }), host('b'), host('c', {}, { sandboxes: 1, memoryMB: 512 })],
        need,
      ),
      ['b', 'c', 'a'],
    )
  })

  it('prefers a host with the template pooled, then baked, over a less loaded one', () => {
    const ranked = rankHosts(
      [
        host('cold', { templates: [] }),
        host('baked', { templates: ['base'] }, { sandboxes: 2, memoryMB: 1024 }),
        host('pooled', { pool: { base: 1 } }, { sandboxes: 5, memoryMB: 2560 }),
      ],
      need,
    )
    assert.deepEqual(ranked, ['pooled', 'baked', 'cold'])
  })

  it('leaves out a host at its sandbox cap, by placements or by what it reports', () => {
    assert.deepEqual(rankHosts([host('full', {}, { sandboxes: 10 }), host('ok')], need), ['ok'])
    assert.deepEqual(rankHosts([host('busy', { sandboxes: 10 }), host('ok')], need), ['ok'])
  })

  it('leaves out a host whose memory (with overcommit) the sandbox would pass', () => {
    // 8 GiB × 1.5 = 12288 MiB of limits
    assert.deepEqual(rankHosts([host('a', {}, { memoryMB: 12000 })], need), [])
    assert.deepEqual(rankHosts([host('a', {}, { memoryMB: 11000 })], need), ['a'])
    assert.deepEqual(rankHosts([host('a')], { ...need, memoryMB: 13000 }), [])
  })

  it('no hosts: nothing to rank', () => {
    assert.deepEqual(rankHosts([], need), [])
  })
})
