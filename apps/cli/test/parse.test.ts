import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { InvalidArgumentError } from 'commander'
import { formatPairs, relativeTime, table } from '../src/format.ts'
import { collectPair, commandFrom, parsePort, parseSeconds } from '../src/parse.ts'

describe('parse', () => {
  it('parseSeconds takes positive numbers only', () => {
    assert.equal(parseSeconds('1.5'), 1.5)
    for (const bad of ['0', '-1', 'x', '', 'Infinity']) assert.throws(() => parseSeconds(bad), InvalidArgumentError)
  })

  it('parsePort takes 0..65535', () => {
    assert.equal(parsePort('7411'), 7411)
    assert.equal(parsePort('0'), 0)
    for (const bad of ['65536', '-1', '1.5', 'http']) assert.throws(() => parsePort(bad), InvalidArgumentError)
  })

  it('collectPair accumulates and keeps = in values', () => {
    const env = collectPair('B=x=y', collectPair('A=1'))
    assert.deepEqual(env, { A: '1', B: 'x=y' })
    assert.deepEqual(collectPair('E='), { E: '' })
    assert.throws(() => collectPair('=v'), InvalidArgumentError)
    assert.throws(() => collectPair('novalue'), InvalidArgumentError)
  })

  it('commandFrom: one word is a shell string, several are argv', () => {
    assert.equal(commandFrom(['ls | wc -l']), 'ls | wc -l')
    assert.deepEqual(commandFrom(['echo', 'a b']), ['echo', 'a b'])
  })
})

describe('format', () => {
  it('table aligns columns and trims trailing space', () => {
    assert.equal(
      table(
        ['ID', 'STATE'],
        [
          ['sbx_long', 'running'],
          ['s', ''],
        ],
      ),
      'ID        STATE\nsbx_long  running\ns\n',
    )
  })

  it('relativeTime', () => {
    const now = Date.parse('2025-01-01T00:00:00Z')
    assert.equal(relativeTime('2024-12-31T23:59:18Z', now), '42s ago')
    assert.equal(relativeTime('2025-01-01T00:05:00Z', now), 'in 5m')
    assert.equal(relativeTime('2024-12-31T21:00:00Z', now), '3h ago')
    assert.equal(relativeTime('2024-12-30T00:00:00Z', now), '2d ago')
    assert.equal(relativeTime('garbage', now), 'garbage')
  })

  it('formatPairs', () => {
    assert.equal(formatPairs({ a: '1', b: '2' }), 'a=1,b=2')
  })
})
