// Hostile code against the limits: the common case fails inside the sandbox and it lives on; when
// the whole sandbox dies it is reported as errored with a reason; the host and others carry on.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Sandbox, SandboxErroredError } from '@forkbox/sdk'
import { until, useTestHost } from './harness.ts'

const host = useTestHost({
  setup: async (t) => {
    bystander = await Sandbox.create({ ...t.conn })
    await bystander.files.write('/work/state.txt', 'untouched')
  },
  teardown: async () => {
    await bystander.kill()
  },
})
let bystander: Sandbox

describe('limits', () => {
  it('a 4 GB allocation in a 512 MB sandbox raises MemoryError inside; the sandbox lives on', async () => {
    await using sbx = await Sandbox.create({ ...host().conn, resources: { memoryMB: 512 } })
    const r = await sbx.exec(['python3', '-c', 'b = bytearray(4 * 1024**3)'], { timeoutSeconds: 60 })
    assert.equal(r.exitCode, 1)
    assert.match(r.stderr, /MemoryError/)
    assert.equal((await sbx.exec(['echo', 'alive'])).stdout, 'alive\n')
  })

  it('a fork bomb is contained by the process limit; the sandbox lives on', async () => {
    await using sbx = await Sandbox.create({ ...host().conn, resources: { memoryMB: 512 } })
    const r = await sbx
      .exec('bomb() { bomb | bomb & }; bomb; sleep 2; echo survived', { timeoutSeconds: 30 })
      .catch((e) => e)
    assert.ok(!(r instanceof SandboxErroredError), `sandbox died: ${String(r)}`)
    // the exec's whole process group is killed when it ends; the kernel may take a moment to
    // release thousands of pids, during which a new process can meet EAGAIN (EXEC_FAILED)
    let after = ''
    await until(
      'a command runs again after the bomb',
      async () => {
        after = await sbx.exec(['echo', 'alive'], { timeoutSeconds: 30 }).then(
          (r) => r.stdout,
          (e: { code?: string }) => {
            if (e.code !== 'EXEC_FAILED') throw e
            return ''
          },
        )
        return after === 'alive\n'
      },
      15_000,
    )
    assert.equal((await sbx.getInfo()).state, 'running')
  })

  it('filling the disk gets ENOSPC inside, not on the host', async () => {
    await using sbx = await Sandbox.create({ ...host().conn, resources: { diskMB: 64 } })
    const r = await sbx.exec(
      'head -c 200000000 /dev/zero > /work/fill; echo "exit=$?"; ls -l /work/fill | cut -d" " -f5',
    )
    assert.match(r.stderr, /No space left on device/)
    const size = Number(r.stdout.trim().split('\n')[1])
    assert.ok(size <= 64 * 1024 * 1024, `wrote ${size} bytes`)
    assert.equal((await sbx.exec(['echo', 'alive'])).stdout, 'alive\n')
  })

  it('processes that together pass the memory limit are OOM-killed, never a hang', async () => {
    const sbx = await Sandbox.create({ ...host().conn, resources: { memoryMB: 256 } })
    // Each hog stays under its own rlimit; together they pass the sandbox's cgroup limit. Seen here:
    // hogs get MemoryError or the host OOM killer takes them (their systrap stubs) and the sandbox
    // lives on; if the sandbox kernel is taken instead, it must be reported errored/out_of_memory.
    const hog = 'import time; b = b"x" * (200 * 1024 * 1024); time.sleep(3)'
    const script = `pids=(); for i in 1 2 3 4; do python3 -c '${hog}' & pids+=($!); done; for p in "\${pids[@]}"; do wait $p; echo "st=$?"; done`
    const r = await sbx.exec(script, { timeoutSeconds: 60 }).catch((e: unknown) => e)
    if (r instanceof SandboxErroredError) {
      assert.equal(r.reason, 'out_of_memory')
      assert.equal((await sbx.getInfo()).errorReason, 'out_of_memory')
    } else {
      const out = (r as { stdout: string }).stdout
      assert.equal(out.match(/st=/g)?.length, 4, out)
      // a hog fails with MemoryError (st=1: gVisor refuses the allocation) or is OOM-killed (st=137)
      assert.ok((out.match(/st=0/g)?.length ?? 0) < 4, `every hog got its memory: ${out}`)
      assert.match(out, /st=(1|137)\b/)
      assert.equal((await sbx.exec(['echo', 'alive'])).stdout, 'alive\n')
    }
    await sbx.kill()
  })

  it('when the sandbox itself runs out of memory it is errored with out_of_memory, never a hang', async () => {
    const sbx = await Sandbox.create({ ...host().conn, resources: { memoryMB: 256 } })
    // the root overlay keeps writes in the sandbox kernel's own memory: filling it takes the sandbox down
    const err = await sbx
      .exec('head -c 800000000 /dev/zero > /var/tmp/fill', { user: 'root', timeoutSeconds: 60 })
      .then(
        () => null,
        (e: unknown) => e,
      )
    assert.ok(err instanceof SandboxErroredError, `expected SandboxErroredError, got ${String(err)}`)
    assert.equal(err.reason, 'out_of_memory')
    const info = await sbx.getInfo()
    assert.equal(info.state, 'errored')
    assert.equal(info.errorReason, 'out_of_memory')
    await assert.rejects(sbx.exec(['true']), SandboxErroredError)
    await sbx.kill()
  })

  it('other sandboxes kept working through all of it', async () => {
    assert.equal(await bystander.files.read('/work/state.txt'), 'untouched')
    assert.equal((await bystander.exec(['echo', 'fine'])).stdout, 'fine\n')
  })
})
