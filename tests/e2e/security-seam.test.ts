// A hostile guest cannot take the platform down. Root in a sandbox controls its guest daemon (PID 1)
// and so the frames the agent reads; here the host writes forged frames into a sandbox's guest-output
// FIFO, as such a guest would. Each time only that sandbox fails: it is stopped and reported `errored`
// (reason guest_protocol_error), calls on it get SANDBOX_ERRORED, and the server (this very process)
// and a sandbox created before carry on.
import assert from 'node:assert/strict'
import { constants } from 'node:fs'
import { open } from 'node:fs/promises'
import { join } from 'node:path'
import { before, describe, it } from 'node:test'
import { Sandbox, SandboxErroredError } from '@forkbox/sdk'
import { useTestHost } from './harness.ts'

// the guest wire format, written out as a guest would: u32 BE length | u8 type | u32 BE channel | payload
const FrameType = { json: 1, stdout: 2 } as const
const MAX_FRAME_BYTES = 16 * 1024 * 1024
function encodeFrame(type: number, channel: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(9)
  header.writeUInt32BE(payload.length, 0)
  header.writeUInt8(type, 4)
  header.writeUInt32BE(channel, 5)
  return Buffer.concat([header, payload])
}

const host = useTestHost({
  // no warm pool: a sandbox is a plain restore whose first request (configure) is channel 1, so
  // the tests know which channel a request of theirs runs on
  options: () => ({ poolSize: 0 }),
  teardown: async () => {
    await bystander?.kill()
  },
})
let bystander: Sandbox | undefined

/** Writes `bytes` into the sandbox's guest-output FIFO, where the agent reads its guest. */
async function forge(id: string, ...frames: Buffer[]): Promise<void> {
  const fifo = join(host().dataDir, 'sandboxes', id, 'guest.out')
  // blocking writes on libuv's threads: this process is also the reader that drains the FIFO
  const f = await open(fifo, constants.O_WRONLY)
  try {
    // each frame in one write: up to PIPE_BUF bytes it cannot interleave with the guest's own
    for (const frame of frames) await f.write(frame)
  } catch (err) {
    // the agent stopped the sandbox halfway through: its FIFO has no reader left
    if ((err as NodeJS.ErrnoException).code !== 'EPIPE') throw err
  } finally {
    await f.close()
  }
}

const json = (channel: number, msg: unknown) => encodeFrame(FrameType.json, channel, Buffer.from(JSON.stringify(msg)))
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

async function waitForState(sbx: Sandbox, state: string) {
  const deadline = Date.now() + 15_000
  for (;;) {
    const info = await sbx.getInfo()
    if (info.state === state || Date.now() > deadline) return info
    await sleep(100)
  }
}

/** The hostile sandbox is reported errored with the reason, calls on it get SANDBOX_ERRORED; the
 * server and the bystander work as before. */
async function assertOnlyItFailed(hostile: Sandbox) {
  const info = await waitForState(hostile, 'errored')
  assert.equal(info.state, 'errored')
  assert.equal(info.errorReason, 'guest_protocol_error')
  assert.match(info.errorMessage ?? '', /broke the protocol/)
  for (const call of [() => hostile.exec('true'), () => hostile.files.read('/etc/hostname')]) {
    await assert.rejects(call(), (err: unknown) => {
      assert.ok(err instanceof SandboxErroredError, String(err))
      assert.equal(err.code, 'SANDBOX_ERRORED')
      assert.equal(err.reason, 'guest_protocol_error')
      return true
    })
  }
  // the server is this process: still here and answering
  const health = await fetch(`${host().conn.url}/healthz`)
  assert.equal(health.status, 200)
  assert.ok((await Sandbox.list(host().conn)).some((s) => s.id === bystander?.id))
  const out = await bystander?.exec(['sh', '-c', 'echo $((6 * 7)); echo err >&2; exit 3'])
  assert.deepEqual([out?.stdout, out?.stderr, out?.exitCode], ['42\n', 'err\n', 3])
  await bystander?.files.write('/work/still.txt', 'working')
  assert.equal(await bystander?.files.read('/work/still.txt'), 'working')
}

/**
 * The channel the agent gives the next request: a restored guest tells its agent where to start,
 * so the test finds it. Stdout forged onto every low channel while an exec runs shows up in that
 * exec's output, tagged with its channel (frames for channels nobody has open are dropped).
 */
async function nextExecChannel(hostile: Sandbox): Promise<number> {
  const probe = hostile.exec(['sh', '-c', 'sleep 1.5; echo real'])
  await sleep(500)
  await forge(
    hostile.id,
    ...Array.from({ length: 4096 }, (_, c) => encodeFrame(FrameType.stdout, c + 1, Buffer.from(`forged-${c + 1}\n`))),
  )
  const { stdout } = await probe
  const channel = Number(/^forged-(\d+)\nreal\n$/.exec(stdout)?.[1])
  assert.ok(channel > 0, `forged output did not show up in the exec's: ${stdout}`)
  return channel + 1
}

describe('a hostile guest', () => {
  before(async () => {
    bystander = await Sandbox.create({ ...host().conn })
    assert.equal((await bystander.exec('echo up')).stdout, 'up\n')
  })

  it('a malformed JSON frame fails only its sandbox', async () => {
    const hostile = await Sandbox.create({ ...host().conn })
    await forge(hostile.id, encodeFrame(FrameType.json, 0, Buffer.from('{')))
    await assertOnlyItFailed(hostile)
  })

  it('a forged exit with a wrong-typed exitCode for a running exec fails its sandbox, not the exec', async () => {
    const hostile = await Sandbox.create({ ...host().conn })
    const channel = await nextExecChannel(hostile)
    // end the next exec with an exit the guest never sent
    const started = Date.now()
    const running = hostile.exec(['sh', '-c', 'sleep 20; exit 0'])
    running.catch(() => {})
    await sleep(500)
    await forge(
      hostile.id,
      json(channel, { type: 'exit', exitCode: '77', signal: null, timedOut: false, durationMs: 1 }),
    )
    await assert.rejects(running, (err: unknown) => {
      assert.ok(err instanceof SandboxErroredError, String(err))
      assert.equal(err.reason, 'guest_protocol_error')
      return true
    })
    assert.ok(Date.now() - started < 15_000, 'the exec ended with the sandbox, not with the command')
    await assertOnlyItFailed(hostile)
  })

  it('an oversize frame header fails only its sandbox', async () => {
    const hostile = await Sandbox.create({ ...host().conn })
    const header = Buffer.alloc(9)
    header.writeUInt32BE(MAX_FRAME_BYTES + 1, 0)
    header.writeUInt8(FrameType.json, 4)
    header.writeUInt32BE(1, 5)
    await forge(hostile.id, header)
    await assertOnlyItFailed(hostile)
  })

  it('output flooded past an exec cap fails its sandbox before the agent buffers it', async () => {
    const hostile = await Sandbox.create({ ...host().conn })
    const channel = await nextExecChannel(hostile)
    const running = hostile.exec(['sleep', '20'], { maxOutputBytes: 1024 })
    running.catch(() => {})
    await sleep(500)
    // 32 frames of 4 KiB on the exec's channel: far past its 1 KiB cap and the agent's slack
    const chunk = encodeFrame(FrameType.stdout, channel, Buffer.alloc(4096 - 9, 'x'))
    await forge(hostile.id, ...Array.from({ length: 32 }, () => chunk))
    await assert.rejects(running, (err: unknown) => err instanceof SandboxErroredError)
    await assertOnlyItFailed(hostile)
  })
})
