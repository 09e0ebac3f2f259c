// stepKeys: a change reaches the changed step and every later one, never an earlier one.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { planDockerfile } from '../src/templates/dockerfile.ts'
import { stepKeys } from '../src/templates/dockerfile-keys.ts'

const lines = [
  'FROM debian:12 AS build',
  'ARG MODE=dev',
  'RUN apt-get update',
  'COPY src/ /src/',
  'RUN make $MODE',
  'FROM forkbox:base',
  'COPY --from=build /out /out',
  'COPY app.py /app/',
  'RUN echo done',
]
const hashes = new Map([
  ['src', 'h-src'],
  ['app.py', 'h-app'],
])

function keys(text: string[], opts: { hashes?: Map<string, string>; buildArgs?: Record<string, string> } = {}) {
  return stepKeys(planDockerfile(text.join('\n'), { buildArgs: opts.buildArgs }), opts.hashes ?? hashes).flat()
}

/** Index of the first differing key; asserts every key from there on differs. */
function changedFrom(a: string[], b: string[]): number {
  assert.equal(a.length, b.length)
  const first = a.findIndex((k, i) => k !== b[i])
  assert.ok(first >= 0, 'expected some key to change')
  for (let i = first; i < a.length; i++) assert.notEqual(a[i], b[i], `key ${i} should change`)
  return first
}

describe('stepKeys', () => {
  const base = keys(lines)

  it('gives one distinct sha256 per step and is stable', () => {
    assert.equal(base.length, 6)
    assert.equal(new Set(base).size, 6)
    for (const k of base) assert.match(k, /^[0-9a-f]{64}$/)
    assert.deepEqual(keys(lines), base)
  })

  it('does not move when only a line number moves (a comment added)', () => {
    assert.deepEqual(keys(['# header', ...lines]), base)
  })

  it('changes from the changed RUN on', () => {
    const edited = lines.map((l) => (l === 'RUN make $MODE' ? 'RUN make -j2 $MODE' : l))
    assert.equal(changedFrom(base, keys(edited)), 2)
  })

  it('changes from the COPY whose content changed on, including a later stage copying from it', () => {
    const h = new Map(hashes).set('src', 'h-src-2')
    assert.equal(changedFrom(base, keys(lines, { hashes: h })), 1)
    const h2 = new Map(hashes).set('app.py', 'h-app-2')
    assert.equal(changedFrom(base, keys(lines, { hashes: h2 })), 4)
  })

  it('changes from the first step using a changed build arg on', () => {
    assert.equal(changedFrom(base, keys(lines, { buildArgs: { MODE: 'prod' } })), 0)
    const late = ['FROM a', 'RUN one', 'ARG M=1', 'RUN two', 'RUN three']
    assert.equal(changedFrom(keys(late), keys(late, { buildArgs: { M: '2' } })), 1)
  })

  it('changes the last step only when only the last step changes', () => {
    const edited = [...lines.slice(0, -1), 'RUN echo finished']
    assert.equal(changedFrom(base, keys(edited)), 5)
  })

  it('keys by image digest when given one', () => {
    const plan = planDockerfile('FROM img:1\nRUN x\n')
    const a = stepKeys(plan, new Map(), { imageDigests: new Map([['img:1', 'sha256:aa']]) })
    const b = stepKeys(plan, new Map(), { imageDigests: new Map([['img:1', 'sha256:bb']]) })
    assert.notDeepEqual(a, b)
  })

  it('refuses to key a context copy without its content hash', () => {
    assert.throws(() => keys(lines, { hashes: new Map() }), /no content hash for src/)
  })
})
