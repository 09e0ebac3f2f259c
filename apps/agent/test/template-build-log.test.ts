// A build's log: output split into line events, the instruction's text, the failing step's tail; which stages run.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { BuildLogEvent } from '@forkbox/protocol'
import { buildSpec } from '../src/runtime/oci-spec.ts'
import { instructionText, LineSplitter, StepOutput } from '../src/templates/build-log.ts'
import { GUEST_PYTHON } from '../src/templates/build-steps.ts'
import { neededStages } from '../src/templates/builder.ts'
import { planDockerfile } from '../src/templates/dockerfile.ts'

const enc = (s: string) => new TextEncoder().encode(s)

describe('build log', () => {
  it('splits chunks into lines across chunk and character boundaries', () => {
    const s = new LineSplitter()
    const euro = enc('€')
    assert.deepEqual(s.push(enc('one\ntw')), ['one'])
    assert.deepEqual(s.push(new Uint8Array([...enc('o '), ...euro.slice(0, 1)])), [])
    assert.deepEqual(s.push(new Uint8Array([...euro.slice(1), ...enc('\r\nprogress 1\rprogress 2\nrest')])), [
      'two €',
      'progress 1',
      'progress 2',
    ])
    assert.deepEqual(s.end(), ['rest'])
    assert.deepEqual(s.end(), [])
  })

  it('emits one event per line, in order, and keeps the tail for a failure', () => {
    const events: BuildLogEvent[] = []
    const out = new StepOutput(3, (e) => events.push(e))
    for (let i = 0; i < 50; i++) out.push('stdout', enc(`line ${i}\n`))
    out.push('stderr', enc('boom'))
    out.end()
    assert.equal(events.length, 51)
    assert.deepEqual(events[0], { type: 'output', step: 3, stream: 'stdout', line: 'line 0' })
    assert.deepEqual(events.at(-1), { type: 'output', step: 3, stream: 'stderr', line: 'boom' })
    const tail = out.tail().split('\n')
    assert.equal(tail.length, 40)
    assert.equal(tail.at(-1), 'boom')
    assert.equal(tail[0], 'line 11')
  })

  it('gives an instruction as written, continuation lines joined', () => {
    const df = 'FROM x\nRUN apt-get update && \\\n    apt-get install -y curl\nUSER u\n'
    assert.equal(instructionText(df, 2), 'RUN apt-get update && apt-get install -y curl')
    assert.equal(instructionText(df, 4), 'USER u')
    assert.equal(instructionText(undefined, 4), 'line 4')
  })
})

describe('build stages', () => {
  it('builds only the stages the target needs', () => {
    const plan = planDockerfile(
      [
        'FROM forkbox:base AS deps',
        'RUN true',
        'FROM forkbox:base AS unused',
        'RUN false',
        'FROM deps AS build',
        'RUN true',
        'FROM forkbox:base',
        'COPY --from=build /x /x',
      ].join('\n'),
    )
    assert.deepEqual(neededStages(plan), [0, 2, 3])
  })
})

describe('build sandboxes', () => {
  const input = {
    rootfs: '/merged',
    guestDir: '/g',
    runtimeDir: '/r',
    cgroupsPath: '/c',
    netnsPath: '/run/netns/n',
    hostname: 'h',
    resources: { vcpus: 1, memoryMB: 256, diskMB: 256, pids: 512 },
  }
  type Spec = {
    mounts: { destination: string; type: string; source: string; options?: string[] }[]
    process: { args: string[] }
  }

  it('copy steps run on the interpreter the guest runs on', () => {
    assert.equal((buildSpec(input) as Spec).process.args[0], GUEST_PYTHON)
  })

  it('keep /home, /tmp and /work in the root (a RUN writes the layer) and bind inputs read-only', () => {
    const spec = buildSpec({
      ...input,
      build: { readOnly: [{ destination: '/.forkbox-build/src', source: '/ctx' }] },
    }) as Spec
    const dests = spec.mounts.map((m) => m.destination)
    for (const d of ['/home', '/tmp', '/work']) assert.ok(!dests.includes(d), d)
    const src = spec.mounts.find((m) => m.destination === '/.forkbox-build/src')
    assert.deepEqual(src, {
      destination: '/.forkbox-build/src',
      source: '/ctx',
      type: 'bind',
      options: ['rbind', 'ro'],
    })
  })
})
