// ARG scoping and `$VAR` substitution in a Dockerfile plan, and the words lexer behind them.
// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these strings are Dockerfile text, where ${VAR} is literal
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { AppError } from '@forkbox/protocol'
import { planDockerfile } from '../src/templates/dockerfile.ts'
import type { BuildPlan, RunStep } from '../src/templates/dockerfile-plan.ts'
import { expandWord, expandWords } from '../src/templates/dockerfile-words.ts'

function runs(plan: BuildPlan, stage = 0): RunStep[] {
  return (plan.stages[stage]?.steps ?? []).filter((s): s is RunStep => s.op === 'run')
}

describe('ARG scoping', () => {
  it('an ARG before FROM is usable in FROM and only re-imported into a stage by a bare ARG', () => {
    const text = 'ARG TAG=12\nFROM debian:${TAG}\nWORKDIR /w$TAG\nARG TAG\nWORKDIR /v$TAG\n'
    const plan = planDockerfile(text)
    assert.deepEqual(plan.stages[0]?.from, { kind: 'image', ref: 'debian:12' })
    assert.deepEqual(
      plan.stages[0]?.steps.map((s) => s.op === 'workdir' && s.path),
      ['/w', '/v12'],
    )
    assert.equal(planDockerfile(text, { buildArgs: { TAG: '13' } }).stages[0]?.from.kind, 'image')
    assert.deepEqual(planDockerfile(text, { buildArgs: { TAG: '13' } }).stages[0]?.from, {
      kind: 'image',
      ref: 'debian:13',
    })
  })

  it('a stage ARG is scoped to its stage and from its line on; build args override defaults', () => {
    const text = 'FROM a\nRUN echo 1\nARG MODE=dev\nRUN echo 2\nFROM b\nRUN echo 3\n'
    const plan = planDockerfile(text, { buildArgs: { MODE: 'prod' } })
    assert.deepEqual(
      runs(plan).map((r) => r.env),
      [{}, { MODE: 'prod' }],
    )
    assert.deepEqual(runs(plan, 1)[0]?.env, {})
    assert.deepEqual(runs(planDockerfile(text))[1]?.buildArgs, { MODE: 'dev' })
  })

  it('ENV wins over an ARG of the same name, and the ARG no longer counts as a build arg', () => {
    const plan = planDockerfile('FROM a\nARG V=arg\nENV V=env\nRUN echo\nWORKDIR /$V\n', { buildArgs: { V: 'x' } })
    assert.deepEqual(runs(plan)[0]?.env, { V: 'env' })
    assert.deepEqual(runs(plan)[0]?.buildArgs, {})
    assert.deepEqual(plan.stages[0]?.steps[1], { op: 'workdir', line: 5, path: '/env', buildArgs: {} })
  })

  it('an ARG default may use earlier ARGs and ENV', () => {
    const plan = planDockerfile('FROM a\nENV E=e\nARG A=1\nARG B=${A}-$E\nRUN true\n')
    assert.deepEqual(runs(plan)[0]?.env, { E: 'e', A: '1', B: '1-e' })
  })

  it('records the build args a COPY or WORKDIR used', () => {
    const plan = planDockerfile('FROM a\nARG DIR=/d\nARG OTHER=o\nCOPY x $DIR/\n')
    assert.deepEqual(plan.stages[0]?.steps[0]?.buildArgs, { DIR: '/d' })
  })

  it('keeps RUN and CMD unexpanded: the shell expands them', () => {
    const plan = planDockerfile('FROM a\nENV X=1\nRUN echo $X\nCMD echo ${X}\n')
    assert.deepEqual(runs(plan)[0]?.argv, ['/bin/sh', '-c', 'echo $X'])
    assert.deepEqual(plan.startCmd, ['/bin/sh', '-c', 'echo ${X}'])
  })

  it('reports a ${VAR:?} that is unset as a problem on its line', () => {
    assert.throws(
      () => planDockerfile('FROM a\nWORKDIR ${NOPE:?must be set}\n'),
      (e) => e instanceof AppError && /line 2: NOPE: must be set/.test(e.message),
    )
  })

  it('sees the base image env when the builder knows it', () => {
    const plan = planDockerfile('FROM python:3.12\nENV PATH=/venv/bin:$PATH\n', {
      baseConfig: () => ({ env: { PATH: '/usr/bin' } }),
    })
    assert.equal(plan.stages[0]?.config.env.PATH, '/venv/bin:/usr/bin')
  })
})

describe('word expansion', () => {
  const vars: Record<string, string> = { A: 'a', EMPTY: '', SP: 'x y' }
  const look = (n: string) => vars[n]
  const w = (s: string) => expandWord(s, look).word

  it('expands $VAR and ${VAR}, unset to empty', () => {
    assert.equal(w('$A-${A}_$NONE.'), 'a-a_.')
    assert.equal(w('$'), '$')
    assert.equal(w('cost $5'), 'cost $5')
  })

  it('applies :-, -, :+ and + as Docker does', () => {
    assert.equal(w('${NONE:-def}'), 'def')
    assert.equal(w('${EMPTY:-def}'), 'def')
    assert.equal(w('${EMPTY-def}'), '')
    assert.equal(w('${A:-def}'), 'a')
    assert.equal(w('${A:+alt}'), 'alt')
    assert.equal(w('${EMPTY:+alt}'), '')
    assert.equal(w('${EMPTY+alt}'), 'alt')
    assert.equal(w('${NONE:+alt}'), '')
    assert.equal(w('${NONE:-$A/x}'), 'a/x')
  })

  it('keeps single quotes literal, expands in double quotes, honours escapes', () => {
    assert.equal(w(`'$A'`), '$A')
    assert.equal(w('"$A b"'), 'a b')
    assert.equal(w('\\$A'), '$A')
    assert.equal(w('"\\$A"'), '$A')
    assert.equal(w('"a\\nb"'), 'a\\nb')
  })

  it('splits words on unquoted spaces only, never on expanded values', () => {
    assert.deepEqual(expandWords(`a "b c" 'd e' $SP`, look).words, ['a', 'b c', 'd e', 'x y'])
  })

  it('records the names it looked up', () => {
    assert.deepEqual([...expandWord('$A ${NONE:-x}', look).used].sort(), ['A', 'NONE'])
  })

  it('refuses unsupported and broken substitutions', () => {
    assert.throws(() => w('${A%%x}'), /unsupported substitution/)
    assert.throws(() => w('${A'), /missing }/)
    assert.throws(() => w('"open'), /unterminated/)
  })
})
