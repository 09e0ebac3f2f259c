// Argument parsers for commander options; they throw InvalidArgumentError so commander reports usage.
import { InvalidArgumentError } from 'commander'

export function parseSeconds(value: string): number {
  const n = Number(value)
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0)
    throw new InvalidArgumentError('expected a positive number of seconds')
  return n
}

export function parsePort(value: string): number {
  const n = Number(value)
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('expected a port between 0 and 65535')
  return n
}

/** Accumulates repeated `K=V` options into a record; the value may itself contain `=`. */
export function collectPair(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const eq = value.indexOf('=')
  if (eq <= 0) throw new InvalidArgumentError(`expected KEY=VALUE, got '${value}'`)
  return { ...previous, [value.slice(0, eq)]: value.slice(eq + 1) }
}

/** One word runs under `bash -c` (so `'ls | wc -l'` works); several are exec'd as argv. */
export function commandFrom(words: string[]): string | string[] {
  return words.length === 1 && words[0] !== undefined ? words[0] : words
}

/** A whole number at least 0 (a quota). */
export function parseCount(value: string): number {
  const n = Number(value)
  if (value.trim() === '' || !Number.isInteger(n) || n < 0)
    throw new InvalidArgumentError('expected a whole number, 0 or more')
  return n
}

/** `perSecond/burst` (`10/50`): a rate limit. */
export function parseRate(value: string): { perSecond: number; burst: number } {
  const m = /^(\d+(?:\.\d+)?)\/(\d+)$/.exec(value.trim())
  const perSecond = Number(m?.[1])
  const burst = Number(m?.[2])
  if (!m || !(perSecond > 0) || !(burst >= 1)) throw new InvalidArgumentError('expected perSecond/burst, e.g. 10/50')
  return { perSecond, burst }
}

/** A comma-separated list. */
export function parseList(value: string): string[] {
  return value
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean)
}
