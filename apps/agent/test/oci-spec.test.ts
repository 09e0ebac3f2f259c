import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { buildSpec, cgroupLimits, guestLimits, SENTRY_OVERHEAD_BYTES } from '../src/runtime/oci-spec.ts'

describe('OCI spec', () => {
  const resources = { vcpus: 1.5, memoryMB: 512, diskMB: 256, pids: 1024 }
  const spec = buildSpec({
    rootfs: '/r',
    guestDir: '/g',
    runtimeDir: '/r',
    cgroupsPath: '/forkbox/x',
    netnsPath: '/run/netns/n',
    hostname: 'h',
    resources,
  }) as {
    linux: {
      cgroupsPath: string
      resources: { memory: { limit: number }; pids: { limit: number }; cpu: { quota: number; period: number } }
    }
    mounts: { destination: string; options?: string[] }[]
    process: { env: string[] }
  }

  it('always sets cgroupsPath with the limits (runsc applies none without it)', () => {
    assert.equal(spec.linux.cgroupsPath, '/forkbox/x')
    assert.equal(spec.linux.resources.memory.limit, 512 * 1024 * 1024 + SENTRY_OVERHEAD_BYTES)
    assert.equal(spec.linux.resources.pids.limit, 1024)
    assert.deepEqual(spec.linux.resources.cpu, { quota: 150_000, period: 100_000 })
    assert.deepEqual(cgroupLimits(resources), { memoryBytes: spec.linux.resources.memory.limit, pids: 1024 })
  })

  it('sizes the writable mounts by the disk limit and hands rlimits to the guest', () => {
    for (const d of ['/home', '/tmp', '/work']) {
      const m = spec.mounts.find((x) => x.destination === d)
      assert.ok(m?.options?.includes('size=256m'), d)
    }
    const limits = guestLimits(resources)
    assert.ok(spec.process.env.includes(`FORKBOX_RLIMIT_AS=${limits.asBytes}`))
    assert.ok(spec.process.env.includes(`FORKBOX_RLIMIT_NPROC=${limits.nproc}`))
  })

  it("hands the template's kernel settings to the guest: the preload, and and how new contexts start warm", () => {
    const envOf = (kernel?: { preload: string; zygote: 'lazy' | 'baked' | 'off' }) =>
      (
        buildSpec({
          rootfs: '/r',
          guestDir: '/g',
          runtimeDir: '/r',
          cgroupsPath: '/c',
          netnsPath: '/n',
          hostname: 'h',
          resources,
          kernel,
        }) as { process: { env: string[] } }
      ).process.env
    assert.ok(envOf({ preload: 'import numpy', zygote: 'lazy' }).includes('FORKBOX_KERNEL_PRELOAD=import numpy'))
    assert.ok(!envOf({ preload: 'import numpy', zygote: 'lazy' }).some((e) => e.startsWith('FORKBOX_CONTEXT_ZYGOTE=')))
    assert.ok(!envOf().some((e) => e.startsWith('FORKBOX_CONTEXT_ZYGOTE=') || e.startsWith('FORKBOX_KERNEL_PRELOAD=')))
    assert.ok(envOf({ preload: '', zygote: 'off' }).includes('FORKBOX_CONTEXT_ZYGOTE=off'))
    assert.ok(envOf({ preload: '', zygote: 'baked' }).includes('FORKBOX_CONTEXT_ZYGOTE=baked'))
  })
})
