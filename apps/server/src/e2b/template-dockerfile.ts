// E2B's template build request (the steps `Template()` records) as a Dockerfile for forkbox's
// builder. Every argument is data: commands ride in exec-form JSON, words are escaped, and
// anything that cannot be said on one Dockerfile line is refused, so no step adds an instruction.
import { posix } from 'node:path'
import { AppError } from '@forkbox/protocol'
import { z } from 'zod'

/** E2B's step types the 2.51 clients send (aptInstall, pipInstall, remove, ... arrive as RUN). */
const STEP_TYPES = ['RUN', 'COPY', 'ENV', 'WORKDIR', 'USER'] as const

export const E2bTemplateStep = z
  .object({
    type: z.string().min(1).max(64),
    args: z
      .array(z.string().max(1024 * 1024))
      .max(1024)
      .default([]),
    filesHash: z.string().max(256).nullish(),
    force: z.boolean().nullish(),
  })
  .passthrough()

/** POST /v2/templates/{templateID}/builds/{buildID} (E2B's TemplateBuildStartV2). */
export const E2bBuildStart = z
  .object({
    fromImage: z.string().max(512).nullish(),
    fromTemplate: z.string().max(128).nullish(),
    fromImageRegistry: z.unknown().optional(),
    startCmd: z
      .string()
      .max(64 * 1024)
      .nullish(),
    readyCmd: z
      .string()
      .max(64 * 1024)
      .nullish(),
    steps: z.array(E2bTemplateStep).max(1000).default([]),
    force: z.boolean().nullish(),
  })
  .passthrough()
export type E2bBuildStart = z.infer<typeof E2bBuildStart>

/** What the builder gets: a Dockerfile, or (no steps, no start command) just an image. */
export type Translation =
  | { kind: 'image'; image: string }
  | {
      kind: 'dockerfile'
      dockerfile: string
      /** The uploaded files each COPY step takes, placed in the context under `e2b/<step>/`. */
      copies: { step: number; hash: string }[]
      /**
       * For each filesystem step of the Dockerfile (RUN, COPY, WORKDIR, in order), the E2B step it
       * came from as the clients number them: `base`, `1`.. (their instruction index + 1), `finalize`.
       */
      stepLabels: string[]
    }

/** The default user and its home, as E2B's templates have them (Docker's would be root and /). */
const DEFAULT_USER = 'user'
/** A user (or uid), optionally with a group, as USER and --chown take it. */
const USER_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,63})?$/
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
/** Characters that end a Dockerfile line (or a parser's idea of one), or are not text. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const LINE_BREAKING = /[\u0000-\u0008\u000a-\u001f\u007f\u0085\u2028\u2029]/
const GLOB = /[*?[{\\]/

/** Runs a step's command with bash where the image has it (E2B's shell), else /bin/sh. */
const SHELL = ['/bin/sh', '-c', 'exec "$(command -v bash || echo /bin/sh)" -c "$1"', 'e2b-step']

const bad = (step: string, message: string): never => {
  throw new AppError('VALIDATION_FAILED', `step ${step}: ${message}`, { step })
}

/**
 * An exec-form JSON array that the Dockerfile parser reads as one line: besides JSON's escapes,
 * `<` (a `<<` would open a heredoc that swallows the lines after it) and everything outside
 * printable ASCII become `\uXXXX`, which the builder's JSON decoding turns back.
 */
export function jsonArray(items: string[]): string {
  return JSON.stringify(items).replace(
    /[^\x20-\x7e]|</g,
    (c) => `\\u${(c.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`,
  )
}

/** A literal word for COPY's JSON form, where the builder still applies quote removal and `$VAR`. */
const literalWord = (s: string) => s.replace(/[\\$'"]/g, '\\$&')
/** A word whose `$VAR` the builder expands (E2B expands them too), all else literal. */
const expandingWord = (s: string) => s.replace(/[\\'"]/g, '\\$&')
const quoted = (s: string) => `"${s.replace(/[\\"]/g, '\\$&')}"`

function oneLine(step: string, what: string, value: string): string {
  if (LINE_BREAKING.test(value)) bad(step, `${what} contains a line break or control character`)
  return value
}

function userName(step: string, user: string): string {
  if (!USER_NAME.test(user)) bad(step, `${JSON.stringify(user)} is not a user name`)
  return user
}

const home = (user: string) => {
  const name = user.split(':')[0] ?? user
  if (name === 'root' || name === '0') return '/root'
  return /^\d+$/.test(name) ? '/' : `/home/${name}`
}

/** The COPY source pattern's fixed directory (the part before its first glob segment), or null without globs. */
function globBase(src: string): string | null {
  const parts = src.split('/')
  const at = parts.findIndex((p) => GLOB.test(p))
  return at < 0 ? null : parts.slice(0, at).join('/')
}

/** forkbox's name for an E2B `fromTemplate`. */
export type TemplateNameOf = (e2bTemplate: string) => string

const RegistryLogin = z.object({
  type: z.literal('registry'),
  username: z.string().min(1).max(256),
  password: z.string().min(1).max(4096),
})

/**
 * The login `fromImage(img, { username, password })` sends for its image's registry; null when
 * none. AWS's and GCP's (`fromAWSRegistry`, `fromGCPRegistry`) are not served.
 */
export function registryLogin(req: E2bBuildStart): { username: string; password: string } | null {
  const config = req.fromImageRegistry
  if (config === undefined || config === null) return null
  const type = (config as { type?: unknown }).type
  if (type === 'aws' || type === 'gcp')
    throw new AppError(
      'NOT_IMPLEMENTED',
      `${type === 'aws' ? 'fromAWSRegistry' : 'fromGCPRegistry'} is not supported by forkbox: use fromImage with a username and password (or PUT /v1/registries)`,
    )
  if (!req.fromImage) throw new AppError('VALIDATION_FAILED', 'registry credentials go with fromImage')
  const login = RegistryLogin.safeParse(config)
  if (!login.success)
    throw new AppError('VALIDATION_FAILED', 'fromImageRegistry takes {type: "registry", username, password}')
  return { username: login.data.username, password: login.data.password }
}

export function translateBuild(req: E2bBuildStart, templateName: TemplateNameOf): Translation {
  if (!req.fromImage === !req.fromTemplate)
    throw new AppError('VALIDATION_FAILED', 'give exactly one of fromImage or fromTemplate')
  let from: string
  if (req.fromImage) {
    const image = oneLine('base', 'fromImage', req.fromImage)
    if (/\s/.test(image) || image.startsWith('-')) bad('base', `${JSON.stringify(image)} is not an image reference`)
    from = image
  } else {
    const name = templateName(req.fromTemplate as string)
    if (!/^[a-z0-9][a-z0-9._@-]*$/.test(name)) bad('base', `${JSON.stringify(name)} is not a template name`)
    from = `forkbox:${name}`
  }
  for (const [i, s] of req.steps.entries())
    if (!(STEP_TYPES as readonly string[]).includes(s.type.toUpperCase()))
      bad(
        String(i + 1),
        `step type ${JSON.stringify(s.type)} is not supported (forkbox builds ${STEP_TYPES.join(', ')})`,
      )
  if (req.fromImage && req.steps.length === 0 && !req.startCmd && !req.readyCmd) return { kind: 'image', image: from }

  const lines = [`FROM ${from}`]
  const stepLabels: string[] = []
  const copies: { step: number; hash: string }[] = []
  // E2B's state (what steps see) and what the Dockerfile has said so far; USER and WORKDIR are
  // written only when a step needs them, so a per-step user switches back after its RUN.
  let user = DEFAULT_USER
  let workdir: string | null = null
  let saidUser: string | null = null
  let saidWorkdir: string | null = null
  const sayUser = (u: string) => {
    if (saidUser === u) return
    lines.push(`USER ${u}`)
    saidUser = u
  }
  /** The template's user and cwd in force, as E2B runs its steps (the workdir made by that user). */
  const settle = (label: string) => {
    sayUser(user)
    const dir = workdir ?? home(user)
    if (saidWorkdir === dir) return
    lines.push(`WORKDIR ${quoted(dir)}`)
    stepLabels.push(label)
    saidWorkdir = dir
  }

  for (const [i, s] of req.steps.entries()) {
    const label = String(i + 1)
    const type = s.type.toUpperCase()
    const args = s.args
    switch (type) {
      case 'RUN': {
        const [cmd, runAs] = args
        if (!cmd) bad(label, 'RUN needs a command')
        settle(label)
        if (runAs) sayUser(userName(label, runAs))
        lines.push(`RUN ${jsonArray([...SHELL, cmd as string])}`)
        stepLabels.push(label)
        break
      }
      case 'COPY': {
        const [src, dest, owner, mode] = args
        if (!src || !dest) bad(label, 'COPY needs a source and a destination')
        if (!s.filesHash || !/^[A-Za-z0-9_-]{1,128}$/.test(s.filesHash))
          bad(label, 'COPY needs the filesHash of its upload')
        const rel = posix.normalize(oneLine(label, 'the source', src as string))
        if (posix.isAbsolute(rel) || rel === '..' || rel.startsWith('../'))
          bad(label, `source ${JSON.stringify(src)} leaves the template's directory`)
        const base = globBase(rel)
        const from = posix.join('e2b', label, base ?? rel)
        let to = oneLine(label, 'the destination', dest as string)
        // a pattern's matches land under the destination directory, keeping their paths below the base
        if (base !== null && !to.endsWith('/')) to += '/'
        if (mode && !/^[0-7]{3,4}$/.test(mode)) bad(label, `mode ${JSON.stringify(mode)} is not an octal mode`)
        settle(label)
        const chown = `--chown=${userName(label, owner || user)}`
        const chmod = mode ? ` --chmod=${mode}` : ''
        lines.push(`COPY ${chown}${chmod} ${jsonArray([literalWord(from), expandingWord(to)])}`)
        stepLabels.push(label)
        copies.push({ step: i + 1, hash: s.filesHash as string })
        break
      }
      case 'ENV': {
        if (args.length === 0 || args.length % 2 !== 0) bad(label, 'ENV takes name and value pairs')
        const pairs: string[] = []
        for (let k = 0; k < args.length; k += 2) {
          const name = args[k] as string
          if (!ENV_NAME.test(name)) bad(label, `${JSON.stringify(name)} is not an environment variable name`)
          pairs.push(`${name}=${quoted(oneLine(label, `the value of ${name}`, args[k + 1] as string))}`)
        }
        lines.push(`ENV ${pairs.join(' ')}`)
        break
      }
      case 'WORKDIR': {
        const [dir] = args
        if (!dir) bad(label, 'WORKDIR needs a path')
        workdir = posix.resolve(workdir ?? home(user), oneLine(label, 'the path', dir as string))
        break
      }
      case 'USER': {
        const [name] = args
        if (!name) bad(label, 'USER needs a user')
        user = userName(label, name as string)
        break
      }
    }
  }
  // the last user and workdir are the template's, as in E2B; then its start and ready commands
  settle('finalize')
  if (req.startCmd) lines.push(`CMD ${jsonArray([...SHELL, req.startCmd])}`)
  if (req.readyCmd) lines.push(`HEALTHCHECK CMD ${jsonArray([...SHELL, readyCheck(req.readyCmd)])}`)
  return { kind: 'dockerfile', dockerfile: `${lines.join('\n')}\n`, copies, stepLabels }
}

/**
 * The ready command, with E2B's `waitForPort(p)` (`ss -Htuln sport = :p`) read from /proc/net
 * instead, so an image without iproute2 can still wait for its port.
 */
export function readyCheck(cmd: string): string {
  const m = /^\[ -n "\$\(ss -Htuln sport = :(\d{1,5})\)" \]$/.exec(cmd.trim())
  const port = Number(m?.[1])
  if (!m || port < 1 || port > 65535) return cmd
  const hex = port.toString(16).toUpperCase().padStart(4, '0')
  // a socket in LISTEN (0A) on the port, IPv4 or IPv6
  return `grep -qsE '^ *[0-9]+: [0-9A-F]+:${hex} [0-9A-F]+:[0-9A-F]+ 0A ' /proc/net/tcp /proc/net/tcp6`
}
