// One build step in its own build sandbox under runsc: the root is the step's host overlay (writes
// land in its upper dir, on a scratch disk of the step's bound), the network is open to the
// internet only (or closed, for a no-network key), RUN runs as the step's user, COPY/ADD copy
// inside the sandbox from a read-only mount.
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { AppError, type EgressPolicy, type ResolvedResources } from '@forkbox/protocol'
import { RUNTIME_PYTHON } from '../guest/runtime.ts'
import type { Containers } from '../sandboxes/containers.ts'
import type { LiveSandbox } from '../sandboxes/live-sandbox.ts'
import { type BuildLogSink, StepOutput } from './build-log.ts'
import type { CopyStep, RunStep, Step } from './dockerfile-plan.ts'
import { BUILD_MOUNT_DIR } from './layers.ts'

/** The internet, never the host, its private networks or the metadata address (the firewall's always-blocked sets). */
export const BUILD_EGRESS: EgressPolicy = { internet: true, allowOut: [], denyOut: [] }
/** A no-network key's build: its steps reach nothing (the resolver answers them nothing either). */
export const BUILD_CLOSED: EgressPolicy = { internet: false, allowOut: [], denyOut: [] }
/**
 * The guest's own interpreter (argv[0] of every sandbox's init, see oci-spec.ts; a unit test keeps
 * the two the same): copies and user switches run on it, so they need nothing of the image's.
 */
export const GUEST_PYTHON = RUNTIME_PYTHON
const COPY_SCRIPT = readFileSync(new URL('./build-copy.py', import.meta.url), 'utf8')
/** Runs argv[2:] as `uid[:gid]` or `name:group`, which the guest's exec (plain user names) can't. */
const SETID_SCRIPT = `import grp, os, pwd, sys
u, _, g = sys.argv[1].partition(":")
pw = None if u.isdigit() else pwd.getpwnam(u)
uid = int(u) if pw is None else pw.pw_uid
gid = (int(g) if g.isdigit() else grp.getgrnam(g).gr_gid) if g else (uid if pw is None else pw.pw_gid)
os.setgroups([]); os.setgid(gid); os.setuid(uid)
os.execvp(sys.argv[2], sys.argv[2:])`
const PLAIN_USER = /^[a-z_][a-z0-9_-]*$/

export interface StepRun {
  /** The step's index over the whole build (log events carry it). */
  index: number
  /** Dockerfile line and text, for a failure's details. */
  line: number
  instruction: string
  resources: ResolvedResources
  /** Epoch ms the whole build must end by. */
  deadline: number
  emit: BuildLogSink
  signal?: AbortSignal
  /** What the step may reach (default: the internet). */
  network?: 'internet' | 'none'
}

export interface StepInputs {
  /** The step's merged overlay dir: the sandbox's root. */
  root: string
  /** The host dir a COPY/ADD reads from (the context, or another stage's mounted rootfs). */
  copySource?: string
  /** The context's kept paths (after .dockerignore), for a copy from the context. */
  contextPaths?: string[]
  /** A CA bundle RUN steps trust beside their image's (the operator's `buildCaBundle`). */
  caBundle?: string | null
}

const CA_BUNDLE = `${BUILD_MOUNT_DIR}/ca-certificates.crt`
/** What the usual clients (OpenSSL, curl, Node, pip, requests) read a CA bundle's path from. */
const CA_ENV = ['SSL_CERT_FILE', 'CURL_CA_BUNDLE', 'NODE_EXTRA_CA_CERTS', 'PIP_CERT', 'REQUESTS_CA_BUNDLE']

function remaining(run: StepRun): number {
  if (run.signal?.aborted) throw new AppError('CANCELLED', 'the build was cancelled', { line: run.line })
  const left = run.deadline - Date.now()
  if (left <= 0) throw new AppError('BUILD_TIMEOUT', 'the build ran out of time', { line: run.line })
  return left
}

/** Runs `step` in a fresh build sandbox on `inputs.root`; resolves with its exit code 0 or throws. */
export async function runStep(containers: Containers, step: Step, inputs: StepInputs, run: StepRun): Promise<void> {
  remaining(run)
  const sbx = await containers.boot(
    {
      id: `build-${randomBytes(6).toString('hex')}`,
      resources: run.resources,
      envs: {},
      network: run.network === 'none' ? BUILD_CLOSED : BUILD_EGRESS,
      rootfs: inputs.root,
      image: null,
      // as in a Docker build: a RUN may start a browser or a JVM
      limitAddressSpace: false,
      build: {
        readOnly: [
          ...(inputs.copySource ? [{ destination: `${BUILD_MOUNT_DIR}/src`, source: inputs.copySource }] : []),
          ...(inputs.caBundle && step.op === 'run' ? [{ destination: CA_BUNDLE, source: inputs.caBundle }] : []),
        ],
      },
    },
    run.signal,
  )
  try {
    if (step.op === 'workdir') {
      await exec(
        sbx,
        [GUEST_PYTHON, '-S', '-c', 'import os, sys; os.makedirs(sys.argv[1], exist_ok=True)', step.path],
        {},
        run,
      )
    } else if (step.op === 'run') {
      // the step's own env wins: a Dockerfile that names its own bundle keeps it
      const ca = inputs.caBundle ? Object.fromEntries(CA_ENV.map((k) => [k, CA_BUNDLE])) : {}
      await exec(sbx, argvAs(step), { ...ca, ...step.env }, run, { cwd: step.workdir ?? '/', user: plainUser(step) })
    } else {
      await exec(sbx, [GUEST_PYTHON, '-S', '-c', COPY_SCRIPT], {}, run, { stdin: copyRequest(step, inputs) })
    }
  } finally {
    await containers.stopAndWait(sbx)
  }
}

function plainUser(step: RunStep): string {
  return step.user && PLAIN_USER.test(step.user) ? step.user : 'root'
}

function argvAs(step: RunStep): string[] {
  if (!step.user || PLAIN_USER.test(step.user)) return step.argv
  return [GUEST_PYTHON, '-S', '-c', SETID_SCRIPT, step.user, ...step.argv]
}

function copyRequest(step: CopyStep, inputs: StepInputs): Uint8Array {
  const req = {
    root: `${BUILD_MOUNT_DIR}/src`,
    sources: step.sources,
    dest: step.dest,
    only: step.from ? null : (inputs.contextPaths ?? []),
    chown: step.chown ?? null,
    chmod: step.chmod ?? null,
    extract: step.extract,
    keep_owner: Boolean(step.from),
  }
  return new TextEncoder().encode(JSON.stringify(req))
}

async function exec(
  sbx: LiveSandbox,
  argv: string[],
  env: Record<string, string>,
  run: StepRun,
  opts: { cwd?: string; user?: string; stdin?: Uint8Array } = {},
): Promise<void> {
  const out = new StepOutput(run.index, run.emit)
  const res = await sbx.guest.exec(
    {
      argv,
      env,
      cwd: opts.cwd ?? '/',
      user: opts.user ?? 'root',
      stdin: opts.stdin,
      timeoutMs: remaining(run),
      maxOutputBytes: 0,
    },
    run.signal,
    {
      onStdout: (c) => out.push('stdout', c),
      onStderr: (c) => out.push('stderr', c),
    },
  )
  out.end()
  if (run.signal?.aborted) throw new AppError('CANCELLED', 'the build was cancelled')
  if (res.timedOut)
    throw new AppError(
      'BUILD_TIMEOUT',
      `the build ran out of time at line ${run.line}`,
      details(run, res.exitCode, out),
    )
  if (res.exitCode !== 0)
    throw new AppError(
      'BUILD_STEP_FAILED',
      `${run.instruction} (line ${run.line}) failed with exit code ${res.exitCode}${res.signal ? ` (${res.signal})` : ''}:\n${out.tail()}`,
      details(run, res.exitCode, out),
    )
}

function details(run: StepRun, exitCode: number, out: StepOutput): Record<string, unknown> {
  return { step: run.index, line: run.line, instruction: run.instruction, exitCode, output: out.tail() }
}
