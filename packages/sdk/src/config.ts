// Where the SDK finds its server and key: explicit option, then FORKBOX_API_KEY / FORKBOX_URL,
// then the credentials file `forkbox up` writes, then the local default URL.
import { AuthenticationError, ForkboxError } from './errors.ts'
import { defaultCredentialsPath, environment, readTextFile, writePrivateFile } from './platform/index.ts'

export const DEFAULT_URL = 'http://127.0.0.1:7411'

/** What the credentials file holds. */
export interface Credentials {
  url?: string
  apiKey?: string
}

export interface ConfigSourceOptions {
  /** Environment to read; defaults to `process.env`. */
  env?: Record<string, string | undefined>
  /** Overrides the credentials file location. */
  credentialsPath?: string
}

export interface ResolveConfigOptions extends ConfigSourceOptions {
  apiKey?: string
  url?: string
}

export interface ResolvedConfig {
  url: string
  apiKey: string | undefined
  credentialsPath: string
  /** Why the credentials file could not be used, when it exists but is unreadable or malformed. */
  credentialsProblem: string | undefined
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value
}

/** `$XDG_CONFIG_HOME/forkbox/credentials.json`, else `~/.config/forkbox/credentials.json`. */
export function credentialsPath(options: ConfigSourceOptions = {}): string {
  if (options.credentialsPath) return options.credentialsPath
  return defaultCredentialsPath(options.env ?? environment())
}

function readCredentialsObject(path: string): Record<string, unknown> {
  let text: string | undefined
  try {
    text = readTextFile(path)
  } catch (err) {
    throw new ForkboxError('INVALID_CONFIG', `cannot read ${path}: ${(err as Error).message}`, { cause: err })
  }
  if (text === undefined) return {}
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (err) {
    throw new ForkboxError('INVALID_CONFIG', `${path} is not valid JSON`, { cause: err })
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ForkboxError('INVALID_CONFIG', `${path} does not hold a JSON object`)
  }
  return parsed as Record<string, unknown>
}

/** The stored credentials; `{}` when the file does not exist. Throws INVALID_CONFIG when it is malformed. */
export function readCredentials(options: ConfigSourceOptions = {}): Credentials {
  const raw = readCredentialsObject(credentialsPath(options))
  const credentials: Credentials = {}
  if (typeof raw.url === 'string' && raw.url !== '') credentials.url = raw.url
  if (typeof raw.apiKey === 'string' && raw.apiKey !== '') credentials.apiKey = raw.apiKey
  return credentials
}

/**
 * Merges `update` into the credentials file (fields left undefined keep their stored values) and
 * writes it atomically with mode 0600. Returns the file's path.
 */
export function writeCredentials(update: Credentials, options: ConfigSourceOptions = {}): string {
  const path = credentialsPath(options)
  let current: Record<string, unknown>
  try {
    current = readCredentialsObject(path)
  } catch {
    current = {} // a malformed file is replaced rather than blocking `forkbox up`
  }
  const next = { ...current }
  if (update.url !== undefined) next.url = update.url
  if (update.apiKey !== undefined) next.apiKey = update.apiKey
  writePrivateFile(path, `${JSON.stringify(next, null, 2)}\n`)
  return path
}

/** Resolves url and apiKey; `apiKey` is undefined when no source has one (see `requireApiKey`). */
export function resolveConfig(options: ResolveConfigOptions = {}): ResolvedConfig {
  const env = options.env ?? environment()
  const path = credentialsPath(options)
  let apiKey = nonEmpty(options.apiKey) ?? nonEmpty(env.FORKBOX_API_KEY)
  let url = nonEmpty(options.url) ?? nonEmpty(env.FORKBOX_URL)
  let credentialsProblem: string | undefined
  if (apiKey === undefined || url === undefined) {
    try {
      const stored = readCredentials({ credentialsPath: path })
      apiKey ??= stored.apiKey
      url ??= stored.url
    } catch (err) {
      credentialsProblem = (err as Error).message
    }
  }
  return { url: (url ?? DEFAULT_URL).replace(/\/+$/, ''), apiKey, credentialsPath: path, credentialsProblem }
}

/**
 * Why `key` cannot be a key, or undefined when it can: a key travels in an HTTP header, so it is
 * visible ASCII. Checked before sending, as fetch refuses such a header before connecting and
 * that would read as an unreachable server.
 */
export function malformedKeyReason(key: string): string | undefined {
  const at = key.search(/[^\x21-\x7e]/)
  if (at < 0) return undefined
  const code = key.codePointAt(at) ?? 0
  const name = code <= 0x20 || code === 0x7f ? 'a space or control character' : 'a non-ASCII character'
  return `the API key contains ${name} (U+${code.toString(16).toUpperCase().padStart(4, '0')} at position ${at + 1}), which a key cannot have: copy the key again as it was issued`
}

/**
 * The API key, or an AuthenticationError that says where a key can come from, or that the key
 * found holds characters a key cannot have.
 */
export function requireApiKey(config: ResolvedConfig): string {
  if (config.apiKey !== undefined) {
    const reason = malformedKeyReason(config.apiKey)
    if (reason) throw new AuthenticationError('UNAUTHENTICATED', reason, { details: { reason: 'malformed_key' } })
    return config.apiKey
  }
  const problem = config.credentialsProblem ? ` (${config.credentialsProblem})` : ''
  throw new AuthenticationError(
    'UNAUTHENTICATED',
    `no API key: pass apiKey, set FORKBOX_API_KEY, or run \`forkbox up\` to write ${config.credentialsPath}${problem}`,
  )
}
