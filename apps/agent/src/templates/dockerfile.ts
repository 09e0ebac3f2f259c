// Turns a Dockerfile into a validated BuildPlan, collecting every instruction forkbox cannot honour.

import { posix } from 'node:path'
import { AppError } from '@forkbox/protocol'
import {
  Copy,
  DockerfileParser,
  type Flag,
  type Instruction,
  ModifiableInstruction,
  type PropertyInstruction,
  Run,
} from 'dockerfile-ast'
import type { BuildPlan, CopyStep, DockerfileProblem, ImageConfig, ImageSource, Stage } from './dockerfile-plan.ts'
import { expandWord, expandWords, isWordError, type Lookup } from './dockerfile-words.ts'

export interface PlanOptions {
  buildArgs?: Record<string, string>
  /**
   * The base image's env, workdir and user, when known: `ENV PATH=/x:$PATH` sees the image's PATH,
   * and RUN steps and the template start from them as Docker's would.
   */
  baseConfig?: (from: ImageSource) => { env: Record<string, string>; workdir?: string; user?: string } | undefined
}

class Problem extends Error {}

const refused: Record<string, string> = {
  VOLUME: 'VOLUME is not supported: a sandbox has one writable filesystem',
  ONBUILD: 'ONBUILD is not supported',
  SHELL: 'SHELL is not supported: RUN uses /bin/sh -c',
  STOPSIGNAL: 'STOPSIGNAL is not supported',
  MAINTAINER: 'MAINTAINER is not supported: use LABEL maintainer=...',
}
const tarNames = /\.(tar|tar\.gz|tgz|tar\.bz2|tbz2?|tar\.xz|txz|tar\.zst)$/i

interface StageState {
  stage: Stage
  /** ARG values declared in this stage so far. */
  args: Map<string, string>
  /** Whether CMD was set in this stage (ENTRYPOINT resets an inherited CMD, as Docker does). */
  cmdSet: boolean
}

/** Parses and validates `text`; throws AppError(VALIDATION_FAILED) listing every problem with its line. */
export function planDockerfile(text: string, options: PlanOptions = {}): BuildPlan {
  const buildArgs = options.buildArgs ?? {}
  const df = DockerfileParser.parse(text)
  const escapeChar = df.getEscapeCharacter()
  const lines = text.split(/\r?\n/)
  const problems: DockerfileProblem[] = []
  const globals = new Map<string, string>()
  const stages: Stage[] = []
  let st: StageState | undefined

  const fail = (message: string): never => {
    throw new Problem(message)
  }
  const stageLookup =
    (s: StageState): Lookup =>
    (name) =>
      s.stage.config.env[name] ?? s.args.get(name)
  const word = (raw: string, lookup: Lookup, used?: Set<string>): string => {
    const r = expandWord(raw, lookup, escapeChar)
    for (const u of r.used) used?.add(u)
    return r.word
  }
  const argValues = (s: StageState, names: Iterable<string>): Record<string, string> => {
    const out: Record<string, string> = {}
    for (const n of names) {
      const v = s.args.get(n)
      if (v !== undefined && s.stage.config.env[n] === undefined) out[n] = v
    }
    return out
  }
  for (const ins of df.getInstructions()) {
    const keyword = ins.getKeyword()
    const line = ins.getRange().start.line + 1
    try {
      if (keyword === 'ARG') {
        for (const p of (ins as PropertyInstruction).getProperties()) {
          const name = p.getName()
          const raw = p.getAssignmentOperator() === null ? undefined : (p.getUnescapedValue() ?? '')
          if (!st) {
            const v = buildArgs[name] ?? (raw === undefined ? undefined : word(raw, (n) => globals.get(n)))
            if (v !== undefined) globals.set(name, v)
            continue
          }
          // Inside a stage an ARG without a default re-imports the global one, as Docker does.
          const v = buildArgs[name] ?? (raw === undefined ? globals.get(name) : word(raw, stageLookup(st)))
          if (v !== undefined) st.args.set(name, v)
          else st.args.delete(name)
        }
        continue
      }
      if (keyword === 'FROM') {
        // A bad FROM still opens a stage, so the lines after it are checked against it.
        const stage: Stage = {
          index: stages.length,
          name: undefined,
          line,
          from: { kind: 'scratch' },
          steps: [],
          config: emptyConfig(),
        }
        st = { stage, args: new Map(), cmdSet: false }
        const earlier = [...stages]
        stages.push(stage)
        openStage(ins, stage, earlier, globals, options, escapeChar)
        continue
      }
      if (!st) fail(`${keyword} before the first FROM (only ARG may come first)`)
      const s = st as StageState
      const cfg = s.stage.config
      const lookup = stageLookup(s)
      checkFlags(ins, keyword)
      switch (keyword) {
        case 'RUN': {
          const argv = commandOf(ins, keyword, lines)
          s.stage.steps.push({
            op: 'run',
            line,
            argv,
            env: { ...Object.fromEntries(s.args), ...cfg.env },
            workdir: cfg.workdir,
            user: cfg.user,
            buildArgs: argValues(s, s.args.keys()),
          })
          break
        }
        case 'COPY':
        case 'ADD':
          s.stage.steps.push(copyStep(ins, keyword, line, s, stages, lookup, escapeChar, argValues))
          break
        case 'ENV':
        case 'LABEL': {
          const props = (ins as PropertyInstruction).getProperties()
          if (props.length === 0) fail(`${keyword} needs NAME=value`)
          for (const p of props) {
            const raw = p.getUnescapedValue()
            if (raw === null) fail(`${keyword} ${p.getName()} needs a value`)
            const used = new Set<string>()
            const value = word(raw ?? '', lookup, used)
            const name = word(p.getName(), lookup, used)
            if (keyword === 'ENV') cfg.env[name] = value
            else cfg.labels[name] = value
          }
          break
        }
        case 'WORKDIR': {
          const used = new Set<string>()
          const dir = word(ins.getArgumentsContent() ?? '', lookup, used)
          if (!dir) fail('WORKDIR needs a path')
          cfg.workdir = posix.resolve(cfg.workdir ?? '/', dir)
          s.stage.steps.push({ op: 'workdir', line, path: cfg.workdir, buildArgs: argValues(s, used) })
          break
        }
        case 'USER':
          cfg.user = word(ins.getArgumentsContent() ?? '', lookup)
          if (!cfg.user) fail('USER needs a user')
          break
        case 'EXPOSE':
          for (const p of expandWords(ins.getArgumentsContent() ?? '', lookup, escapeChar).words) {
            const m = /^(\d+)(?:\/(tcp|udp|sctp))?$/i.exec(p)
            const port = Number(m?.[1])
            if (!m || port < 1 || port > 65535) fail(`EXPOSE ${p}: not a port (ranges are not supported)`)
            if (m?.[2] && m[2].toLowerCase() !== 'tcp') fail(`EXPOSE ${p}: only TCP ports can be exposed`)
            if (!cfg.exposedPorts.includes(port)) cfg.exposedPorts.push(port)
          }
          break
        case 'CMD':
          cfg.cmd = commandOf(ins, keyword, lines)
          s.cmdSet = true
          break
        case 'ENTRYPOINT':
          cfg.entrypoint = commandOf(ins, keyword, lines)
          if (!s.cmdSet) cfg.cmd = undefined
          break
        case 'HEALTHCHECK':
          cfg.healthcheck = healthcheck(ins)
          break
        default:
          fail(refused[keyword] ?? `unknown instruction ${keyword}`)
      }
    } catch (e) {
      if (e instanceof Problem || isWordError(e)) problems.push({ line, message: e.message })
      else throw e
    }
  }
  if (stages.length === 0 && problems.length === 0) problems.push({ line: 1, message: 'no FROM instruction' })
  if (problems.length > 0) {
    problems.sort((a, b) => a.line - b.line)
    const first = problems[0] as DockerfileProblem
    const more = problems.length > 1 ? ` (and ${problems.length - 1} more)` : ''
    throw new AppError('VALIDATION_FAILED', `Dockerfile line ${first.line}: ${first.message}${more}`, { problems })
  }
  const target = stages[stages.length - 1] as Stage
  return {
    stages,
    target: target.index,
    startCmd: startCommand(target.config),
    readyCmd: target.config.healthcheck,
    exposedPorts: target.config.exposedPorts,
    labels: target.config.labels,
  }
}

function emptyConfig(): ImageConfig {
  return {
    env: {},
    workdir: undefined,
    user: undefined,
    exposedPorts: [],
    cmd: undefined,
    entrypoint: undefined,
    healthcheck: undefined,
    labels: {},
  }
}

/** Fills `stage` from its FROM line; `stages` are the ones before it. */
function openStage(
  ins: Instruction,
  stage: Stage,
  stages: Stage[],
  globals: Map<string, string>,
  options: PlanOptions,
  escapeChar: string,
): void {
  const flags = (ins as ModifiableInstruction).getFlags()
  if (flags.length > 0) throw new Problem(`FROM --${flags[0]?.getName()} is not supported`)
  const words = expandWords(ins.getArgumentsContent() ?? '', (n) => globals.get(n), escapeChar).words
  if (words.length === 2 || words.length > 3 || (words.length === 3 && words[1]?.toLowerCase() !== 'as')) {
    throw new Problem('FROM takes an image and an optional AS name')
  }
  const ref = words[0]
  if (!ref) throw new Problem('FROM needs an image')
  stage.name = words[2]?.toLowerCase()
  if (stage.name && stages.some((s) => s.name === stage.name)) {
    throw new Problem(`stage name ${stage.name} is used twice`)
  }
  stage.from = sourceOf(ref, stages)
  if (stage.from.kind === 'stage') {
    const parent = stages[stage.from.index]?.config ?? emptyConfig()
    stage.config = structuredClone(parent)
  } else {
    const base = options.baseConfig?.(stage.from)
    if (base) {
      stage.config.env = { ...base.env }
      stage.config.workdir = base.workdir
      stage.config.user = base.user
    }
  }
}

function sourceOf(ref: string, stages: Stage[]): ImageSource {
  const lower = ref.toLowerCase()
  const stage = stages.find((s) => s.name === lower)
  if (stage) return { kind: 'stage', index: stage.index }
  if (lower === 'scratch') return { kind: 'scratch' }
  if (lower.startsWith('forkbox:')) {
    const name = ref.slice('forkbox:'.length)
    if (!/^[a-z0-9][a-z0-9._@-]*$/.test(name)) throw new Problem(`bad template name in ${ref}`)
    return { kind: 'template', name }
  }
  if (/\s/.test(ref) || ref.startsWith('-')) throw new Problem(`bad image reference ${ref}`)
  return { kind: 'image', ref }
}

const allowedFlags: Record<string, string[]> = {
  COPY: ['from', 'chown', 'chmod'],
  ADD: ['chown', 'chmod'],
  RUN: [],
  HEALTHCHECK: [],
}

function checkFlags(ins: Instruction, keyword: string): void {
  if (!(ins instanceof ModifiableInstruction)) return
  const allowed = allowedFlags[keyword] ?? []
  const bad = ins.getFlags().filter((f: Flag) => !allowed.includes(f.getName()))
  if (bad.length > 0) {
    const names = bad.map((f) => `--${f.getName()}`).join(', ')
    throw new Problem(`${keyword} ${names} ${bad.length > 1 ? 'are' : 'is'} not supported`)
  }
}

/** RUN/CMD/ENTRYPOINT: exec form is the argv; shell form (and heredocs) go to /bin/sh -c. */
function commandOf(ins: Instruction, keyword: string, lines: string[]): string[] {
  const content = (ins.getArgumentsContent() ?? '').trim()
  if (!content) throw new Problem(`${keyword} needs a command`)
  if (content.startsWith('[')) {
    const argv = execForm(content)
    if (argv) {
      if (argv.length === 0) throw new Problem(`${keyword} needs a command`)
      return argv
    }
  }
  const heredocs = ins instanceof Run ? heredocsOf(ins, lines) : []
  // A RUN that is only a heredoc runs the heredoc as the script; otherwise sh reads the heredocs itself.
  const only = heredocs.length === 1 && /^<<-?["']?\w+["']?$/.test(content.split('\n')[0]?.trim() ?? '')
  return ['/bin/sh', '-c', only ? (heredocs[0] as string) : content]
}

function execForm(content: string): string[] | undefined {
  try {
    const v: unknown = JSON.parse(content)
    if (Array.isArray(v) && v.every((x): x is string => typeof x === 'string')) return v
  } catch {}
  return undefined
}

function heredocsOf(ins: Run, lines: string[]): string[] {
  return ins.getHeredocs().map((h) => {
    const r = h.getContentRange()
    if (!r) return ''
    const out: string[] = []
    for (let l = r.start.line; l <= r.end.line; l++) {
      const text = lines[l] ?? ''
      const from = l === r.start.line ? r.start.character : 0
      const to = l === r.end.line ? r.end.character : text.length
      out.push(text.slice(from, to))
    }
    // Docker's heredoc body keeps the newline before its delimiter.
    return `${out.join('\n')}\n`
  })
}

function healthcheck(ins: Instruction): string[] | null {
  const content = (ins.getArgumentsContent() ?? '').trim()
  if (/^none$/i.test(content)) return null
  const m = /^cmd\s+/i.exec(content)
  if (!m) throw new Problem('HEALTHCHECK takes CMD <command> or NONE')
  const rest = content.slice(m[0].length)
  const argv = rest.startsWith('[') ? execForm(rest) : undefined
  if (argv?.length === 0 || !rest.trim()) throw new Problem('HEALTHCHECK CMD needs a command')
  return argv ?? ['/bin/sh', '-c', rest]
}

function copyStep(
  ins: Instruction,
  keyword: string,
  line: number,
  s: StageState,
  stages: Stage[],
  lookup: Lookup,
  escapeChar: string,
  argValues: (s: StageState, names: Iterable<string>) => Record<string, string>,
): CopyStep {
  const mi = ins as ModifiableInstruction
  const heredoc =
    ins instanceof Copy ? ins.getHeredocs().length > 0 : /(^|\s)<<\S/.test(ins.getArgumentsContent() ?? '')
  if (heredoc) throw new Problem(`${keyword} with a heredoc is not supported`)
  const used = new Set<string>()
  const flag = (name: string): string | undefined => {
    const f = mi.getFlags().find((x) => x.getName() === name)
    if (!f) return undefined
    const v = f.getValue()
    if (!v) throw new Problem(`${keyword} --${name} needs a value`)
    const r = expandWord(v, lookup, escapeChar)
    for (const u of r.used) used.add(u)
    return r.word
  }
  const content = (ins.getArgumentsContent() ?? '').trim()
  const json = content.startsWith('[') ? execForm(content) : undefined
  const r = json
    ? { words: json.map((w) => expandWord(w, lookup, escapeChar).word), used: new Set<string>() }
    : expandWords(content, lookup, escapeChar)
  for (const u of r.used) used.add(u)
  if (r.words.length < 2) throw new Problem(`${keyword} needs a source and a destination`)
  const rawDest = r.words[r.words.length - 1] as string
  const sources = r.words.slice(0, -1)
  const from = flag('from')
  const chown = flag('chown')
  const chmod = flag('chmod')
  if (chmod !== undefined && !/^[0-7]{3,4}$/.test(chmod))
    throw new Problem(`${keyword} --chmod=${chmod}: octal modes only`)
  let source: ImageSource | undefined
  if (from !== undefined) {
    const byIndex = /^\d+$/.test(from) ? stages[Number(from)] : undefined
    source = byIndex ? { kind: 'stage', index: byIndex.index } : sourceOf(from, stages)
    if (source.kind === 'stage' && source.index === s.stage.index) throw new Problem(`${keyword} --from its own stage`)
  }
  if (keyword === 'ADD') {
    const url = sources.find((p) => /^[a-z][a-z0-9+.-]*:\/\//i.test(p) || p.startsWith('git@'))
    if (url) throw new Problem(`ADD of a URL (${url}) is not supported yet: download it in a RUN step`)
  }
  const dir = s.stage.config.workdir ?? '/'
  const dest = posix.resolve(dir, rawDest) + (rawDest.endsWith('/') && rawDest !== '/' ? '/' : '')
  if (sources.length > 1 && !dest.endsWith('/')) {
    throw new Problem(`${keyword} with several sources needs a destination ending in /`)
  }
  return {
    op: 'copy',
    line,
    add: keyword === 'ADD',
    sources: sources.map((p) => contextPath(p)),
    dest,
    from: source,
    chown,
    chmod,
    extract: keyword === 'ADD' && sources.length === 1 && tarNames.test(sources[0] as string),
    buildArgs: argValues(s, used),
  }
}

/** A source inside the context (or stage) root: Docker roots `/x` and clamps `..`; we refuse `..` outright. */
function contextPath(p: string): string {
  const n = posix.normalize(`/${p}`)
  if (p.split('/').includes('..')) throw new Problem(`source ${p} leaves the build context`)
  return n === '/' ? '.' : n.slice(1).replace(/\/$/, '')
}

/** ENTRYPOINT and CMD combined: exec-form ENTRYPOINT takes CMD as arguments; shell-form ignores it. */
function startCommand(cfg: ImageConfig): string[] | undefined {
  const ep = cfg.entrypoint
  if (!ep) return cfg.cmd
  if (ep[0] === '/bin/sh' && ep[1] === '-c' && ep.length === 3) return ep
  return [...ep, ...(cfg.cmd ?? [])]
}
