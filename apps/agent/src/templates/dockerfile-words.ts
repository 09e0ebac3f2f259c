// Docker's word rules for the instructions it substitutes in: quote removal, escapes and `$VAR` forms.
// dockerfile-ast gives us the instructions and their raw text; what a word means after Docker's
// substitution is this module's job (the parser leaves it to its consumer).

/** A variable lookup: undefined when the name is not set in scope. */
export type Lookup = (name: string) => string | undefined

export interface Words {
  words: string[]
  /** Names looked up while expanding (set or not): they are what the result depends on. */
  used: Set<string>
}

const nameStart = /[A-Za-z_]/
const nameChar = /[A-Za-z0-9_]/

class WordError extends Error {}

class Lexer {
  private i = 0
  readonly used = new Set<string>()

  constructor(
    private readonly s: string,
    private readonly lookup: Lookup,
    private readonly esc: string,
  ) {}

  /** Splits on unquoted whitespace (when `split`) and expands each word. */
  words(split: boolean): string[] {
    const out: string[] = []
    let cur = ''
    let inWord = false
    while (this.i < this.s.length) {
      const c = this.s[this.i] as string
      if (split && /\s/.test(c)) {
        if (inWord) out.push(cur)
        cur = ''
        inWord = false
        this.i++
        continue
      }
      inWord = true
      if (c === "'") cur += this.single()
      else if (c === '"') cur += this.double()
      else if (c === this.esc) {
        this.i++
        if (this.i < this.s.length) cur += this.s[this.i++]
        else cur += c
      } else if (c === '$') cur += this.dollar()
      else {
        cur += c
        this.i++
      }
    }
    if (inWord) out.push(cur)
    return out
  }

  private single(): string {
    const end = this.s.indexOf("'", this.i + 1)
    if (end < 0) throw new WordError('unterminated single quote')
    const v = this.s.slice(this.i + 1, end)
    this.i = end + 1
    return v
  }

  private double(): string {
    this.i++
    let v = ''
    while (this.i < this.s.length) {
      const c = this.s[this.i] as string
      if (c === '"') {
        this.i++
        return v
      }
      if (c === this.esc && this.i + 1 < this.s.length) {
        const n = this.s[this.i + 1] as string
        // Inside double quotes only these escapeChar; anything else keeps its backslash, as in sh.
        if (n === '"' || n === '$' || n === this.esc) {
          v += n
          this.i += 2
          continue
        }
      }
      if (c === '$') v += this.dollar()
      else {
        v += c
        this.i++
      }
    }
    throw new WordError('unterminated double quote')
  }

  private name(): string {
    let n = ''
    while (this.i < this.s.length && nameChar.test(this.s[this.i] as string)) n += this.s[this.i++]
    return n
  }

  private get(name: string): string | undefined {
    this.used.add(name)
    return this.lookup(name)
  }

  private dollar(): string {
    this.i++
    const c = this.s[this.i]
    if (c === '{') return this.braced()
    if (c === undefined || !nameStart.test(c)) return '$'
    return this.get(this.name()) ?? ''
  }

  private braced(): string {
    this.i++
    const name = this.name()
    if (!name) throw new WordError('bad substitution: ${ without a variable name')
    if (this.s[this.i] === '}') {
      this.i++
      return this.get(name) ?? ''
    }
    if (this.i >= this.s.length) throw new WordError('missing } in substitution')
    let op = this.s[this.i] ?? ''
    if (op === ':') op += this.s[this.i + 1] ?? ''
    if (![':-', ':+', '-', '+', ':?', '?'].includes(op)) {
      throw new WordError(`unsupported substitution \${${name}${op}...}`)
    }
    this.i += op.length
    const word = this.nested()
    const value = this.get(name)
    const set = op.startsWith(':') ? value !== undefined && value !== '' : value !== undefined
    switch (op.at(-1)) {
      case '-':
        return set ? (value as string) : word
      case '+':
        return set ? word : ''
      default:
        if (!set) throw new WordError(`${name}: ${word || 'is not set'}`)
        return value as string
    }
  }

  /** The word inside `${name:-word}`, expanded, up to the matching brace. */
  private nested(): string {
    let v = ''
    while (this.i < this.s.length) {
      const c = this.s[this.i] as string
      if (c === '}') {
        this.i++
        return v
      }
      if (c === "'") v += this.single()
      else if (c === '"') v += this.double()
      else if (c === '$') v += this.dollar()
      else if (c === this.esc && this.i + 1 < this.s.length) {
        v += this.s[this.i + 1]
        this.i += 2
      } else {
        v += c
        this.i++
      }
    }
    throw new WordError('missing } in substitution')
  }
}

/** Expands `text` into words split on unquoted whitespace, as Docker does for COPY, EXPOSE and the like. */
export function expandWords(text: string, lookup: Lookup, escapeChar = '\\'): Words {
  const lx = new Lexer(text, lookup, escapeChar)
  return { words: lx.words(true), used: lx.used }
}

/** Expands `text` as one word (ENV, LABEL and ARG values, WORKDIR, USER). */
export function expandWord(text: string, lookup: Lookup, escapeChar = '\\'): { word: string; used: Set<string> } {
  const lx = new Lexer(text, lookup, escapeChar)
  return { word: lx.words(false).join(''), used: lx.used }
}

export function isWordError(e: unknown): e is Error {
  return e instanceof WordError
}
