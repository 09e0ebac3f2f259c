import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { encodeFrame, FrameDecoder, FrameType, MAX_FRAME_BYTES } from '../src/guest/frames.ts'

describe('guest frames', () => {
  it('round-trips frames split at every byte boundary', () => {
    const frames = [
      encodeFrame(FrameType.json, 1, Buffer.from('{"op":"ping"}')),
      encodeFrame(FrameType.stdout, 7, Buffer.from([0, 1, 2, 255])),
      encodeFrame(FrameType.file, 2),
    ]
    const wire = Buffer.concat(frames)
    for (let cut = 0; cut <= wire.length; cut++) {
      const d = new FrameDecoder()
      const out = [...d.push(wire.subarray(0, cut)), ...d.push(wire.subarray(cut))]
      assert.deepEqual(
        out.map((f) => [f.type, f.channel, [...f.payload]]),
        [
          [1, 1, [...Buffer.from('{"op":"ping"}')]],
          [2, 7, [0, 1, 2, 255]],
          [5, 2, []],
        ],
      )
    }
  })

  it('refuses an oversize frame instead of buffering it', () => {
    const header = Buffer.alloc(9)
    header.writeUInt32BE(MAX_FRAME_BYTES + 1, 0)
    assert.throws(() => new FrameDecoder().push(header), /oversize/)
  })
})
