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
