// Where registry pulls run: which registries are refused outright, which the operator's allow-list
// sends through the host's network, and that every other pull runs in the pull namespace (one,
// opened once, given back at close). The slots are a fake here; network.test.ts and the
// security-builds e2e use real ones.
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { describe, it } from 'node:test'
import { AppError, type EgressPolicy } from '@forkbox/protocol'
import type { Slot } from '../src/network/manager.ts'
import { forbiddenRegistry, PullNetwork, registryAllowed } from '../src/network/pull-network.ts'

describe('forbiddenRegistry', () => {
  it('refuses loopback, link-local, reserved and private addresses and loopback names', () => {
    for (const r of [
      '127.0.0.1:7411',
      '127.1.2.3',
      'localhost:5000',
      'LOCALHOST',
      'registry.localhost:5000',
      '169.254.169.254',
      '0.0.0.0:80',
      '10.0.0.5:5000',
      '172.16.1.1',
      '192.168.1.10:443',
      '100.64.0.1',
    ])
      assert.ok(forbiddenRegistry(r), r)
  })

  it('leaves names and public addresses to the pull network', () => {
    for (const r of ['docker.io', 'ghcr.io', 'registry.example.com:5000', '203.0.113.7:5000', '8.8.8.8'])
      assert.equal(forbiddenRegistry(r), null, r)
  })
})

describe('registryAllowed', () => {
  it('matches the operator list by host:port or by host', () => {
    assert.ok(registryAllowed('127.0.0.1:5000', ['127.0.0.1']))
    assert.ok(registryAllowed('registry.internal:5000', ['registry.internal:5000']))
    assert.ok(!registryAllowed('registry.internal:5001', ['registry.internal:5000']))
    assert.ok(!registryAllowed('127.0.0.1:5000', []))
  })
})

function fakeSlots() {
  const calls: string[] = []
  let applied: EgressPolicy | null = null
  const slot = { slot: 7, netns: `fbx-test-pull-${process.pid}`, iface: 'x', hostIp: '10.9.0.1', sandboxIp: '10.9.0.2' }
  return {
    calls,
    applied: () => applied,
    slots: {
      ready: async () => {
        calls.push('ready')
      },
      acquire: async () => {
        calls.push('acquire')
        return slot as unknown as Slot
      },
      apply: async (_s: Slot, p: EgressPolicy) => {
        calls.push('apply')
        applied = p
      },
      release: async () => {
        calls.push('release')
      },
    },
    slot,
  }
}

describe('PullNetwork', () => {
  it('runs a pull in its namespace (opened once, with internet and no more), an allow-listed one as it is', async () => {
    const f = fakeSlots()
    const pulls = new PullNetwork(f.slots, ['registry.internal'], 'fbx-test-pull-')
    assert.deepEqual(await pulls.command('registry.internal:5000', 'skopeo', ['inspect']), ['skopeo', ['inspect']])
    assert.deepEqual(f.calls, [], 'no namespace for an allow-listed registry')
    const [cmd, args] = await pulls.command('ghcr.io', 'skopeo', ['copy', 'a', 'b'])
    assert.equal(cmd, 'ip')
    assert.deepEqual(args, ['netns', 'exec', f.slot.netns, 'skopeo', 'copy', 'a', 'b'])
    await pulls.command('docker.io', 'skopeo', ['inspect'])
    assert.deepEqual(f.calls, ['ready', 'acquire', 'apply'])
    assert.deepEqual(f.applied(), { internet: true, allowOut: [], denyOut: [] })
    // ip netns exec gives the namespace this resolv.conf: the host redirects its port 53 to the resolver
    assert.match(readFileSync(`/etc/netns/${f.slot.netns}/resolv.conf`, 'utf8'), /nameserver 10\.9\.0\.1/)
    await pulls.close()
    assert.deepEqual(f.calls.slice(-1), ['release'])
    assert.ok(!existsSync(`/etc/netns/${f.slot.netns}`))
  })

  it('refuses a loopback or private registry at once, naming the setting that would allow it', async () => {
    const f = fakeSlots()
    const pulls = new PullNetwork(f.slots, [], 'fbx-test-pull-')
    for (const registry of ['127.0.0.1:7411', '169.254.169.254', '10.1.2.3:5000']) {
      await assert.rejects(pulls.command(registry, 'skopeo', []), (err: unknown) => {
        assert.ok(err instanceof AppError)
        assert.equal(err.code, 'REGISTRY_NOT_ALLOWED')
        assert.match(err.message, /FORKBOX_REGISTRY_ALLOW/)
        return true
      })
    }
    assert.deepEqual(f.calls, [])
    await pulls.close()
  })
})
