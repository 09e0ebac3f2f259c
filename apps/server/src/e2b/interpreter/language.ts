// The code interpreter's language names (and their short forms) as forkbox's code languages.
import { AppError, type CODE_LANGUAGES } from '@forkbox/protocol'

const LANGUAGES: Record<string, (typeof CODE_LANGUAGES)[number]> = {
  python: 'python',
  py: 'python',
  bash: 'bash',
  sh: 'bash',
  javascript: 'javascript',
  js: 'javascript',
  typescript: 'typescript',
  ts: 'typescript',
}

/** forkbox's language for a name the client sent; undefined when it sent none. */
export function language(name: string | undefined | null) {
  if (!name) return undefined
  const l = LANGUAGES[name.toLowerCase()]
  if (!l)
    throw new AppError(
      'VALIDATION_FAILED',
      `language ${name} is not available (python, bash, javascript, typescript are)`,
    )
  return l
}
