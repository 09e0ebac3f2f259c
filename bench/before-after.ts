// Runs bench/seam.ts before and after a change in one sitting: each side a throwaway git worktree
// (node_modules hard-linked from this checkout, so the workspace links point into it), the runs
// alternating (before, after, before, after, ...) so that drift of the machine shows, then one
// table of p50/p99 per measurement, pooled over the rounds, with the difference in %.
//   node --import tsx bench/before-after.ts [--before REF] [--after REF | --after-dir DIR]
//        [--rounds 2] [--iterations N] [--only one-box|fleet]
// --before defaults to bf2e906 (issue 32's start), --after to HEAD; --after-dir measures a
// checkout as it is (uncommitted edits included) instead. The seam.ts of this checkout is copied
// into every worktree; each tree keeps its own bench/lib.ts. It imports nothing of the workspace,
// so that it runs whatever state the code is in.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { copyFileSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'

const REPO = new URL('..', import.meta.url).pathname.replace(/\/$/, '')
const arg = (name: string) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined)
const beforeRef = arg('--before') ?? 'bf2e906'
const afterRef = arg('--after') ?? 'HEAD'
const afterDir = arg('--after-dir')
const rounds = Number(arg('--rounds') ?? 2)
const passOn = ['--iterations', '--only'].flatMap((f) => (arg(f) ? [f, arg(f) as string] : []))

const git = (...args: string[]) => execFileSync('git', ['-C', REPO, ...args], { encoding: 'utf8' }).trim()

interface Side {
  label: 'before' | 'after'
  dir: string
  /** The commit, or for --after-dir the commit its HEAD is at. */
  commit: string
  describe: string
  worktree: boolean
  runs: Record<string, number[]>[]
}

const worktrees: string[] = []
function removeWorktrees(): void {
  for (const dir of worktrees.splice(0)) {
    try {
      git('worktree', 'remove', '--force', dir)
    } catch (err) {
      console.error(`before-after: git worktree remove ${dir} failed (${(err as Error).message}); removing the dir`)
      rmSync(dir, { recursive: true, force: true })
    }
  }
  git('worktree', 'prune')
}

/** A worktree of `ref` under /tmp with this checkout's node_modules hard-linked in, and this seam.ts. */
function worktreeOf(label: Side['label'], ref: string): Side {
  const commit = git('rev-parse', '--verify', `${ref}^{commit}`)
  const dir = join(tmpdir(), `forkbox-${label}-${commit.slice(0, 7)}-${process.pid}`)
  worktrees.push(dir)
  git('worktree', 'add', '--detach', dir, commit)
  // npm links the workspaces with relative symlinks (node_modules/@forkbox/host -> ../../apps/host):
  // copied as they are, they point into the worktree
  const modules = [
    'node_modules',
    ...['apps', 'packages'].flatMap((d) => readdirSync(join(REPO, d)).map((p) => `${d}/${p}/node_modules`)),
  ]
  for (const m of modules)
    if (existsSync(join(REPO, m)) && existsSync(join(dir, m, '..')))
      execFileSync('cp', ['-al', join(REPO, m), join(dir, m)])
  const resolved = execFileSync(process.execPath, ['-e', "console.log(require.resolve('@forkbox/host'))"], {
    cwd: dir,
    encoding: 'utf8',
  }).trim()
  if (!resolved.startsWith(`${dir}/`)) throw new Error(`@forkbox/host in ${dir} resolves to ${resolved}`)
  copyFileSync(join(REPO, 'bench/seam.ts'), join(dir, 'bench/seam.ts'))
  return {
    label,
    dir,
    commit,
    describe: git('log', '-1', '--format=%h %s', commit).slice(0, 100),
    worktree: true,
    runs: [],
  }
}

function checkoutAt(dir: string): Side {
  const at = (...args: string[]) => execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8' }).trim()
  const commit = at('rev-parse', 'HEAD')
  const dirty = at('status', '--porcelain', '--untracked-files=no').split('\n').filter(Boolean).length
  if (dir !== REPO) copyFileSync(join(REPO, 'bench/seam.ts'), join(dir, 'bench/seam.ts'))
  return {
    label: 'after',
    dir,
    commit,
    describe: `${dir} at ${at('log', '-1', '--format=%h %s').slice(0, 80)}${dirty ? ` + ${dirty} uncommitted file(s)` : ''}`,
    worktree: false,
    runs: [],
  }
}

/** The tags a seam.ts process gives its hosts (bench/lib.ts's benchHost and its own agent). */
function tagsOf(pid: number): { cgroupParent: string; stateDir: string }[] {
  return [`forkbox-bench-seam-${pid}`, `fbx-seam-${pid % 100000}`].map((t) => ({
    cgroupParent: t,
    stateDir: `/run/${t}`,
  }))
}

/** What the seam runs left behind on this machine; each list must be empty. */
function leftovers(pids: number[]): Record<string, string[]> {
  const hosts = pids.flatMap(tagsOf)
  // the agent's own names (apps/agent/src/network/manager.ts networkNames), computed here so that
  // this script needs none of the workspace
  const nets = hosts.map(({ cgroupParent, stateDir }) => {
    const h = createHash('sha256').update(`${cgroupParent}:${stateDir}`).digest('hex').slice(0, 4)
    return { ifacePrefix: `fx${h}`, netnsPrefix: `fbx-${h}-` }
  })
  const netns = existsSync('/run/netns') ? readdirSync('/run/netns') : []
  const containers = hosts.flatMap(({ stateDir }) =>
    existsSync(stateDir)
      ? (
          JSON.parse(execFileSync('runsc', [`--root=${stateDir}`, 'list', '--format=json']).toString() || '[]') ?? []
        ).map((c: { id: string }) => `${stateDir}: ${c.id}`)
      : [],
  )
  const ps = execFileSync('ps', ['-eo', 'args=']).toString().split('\n')
  return {
    containers,
    stateDirs: hosts.map((h) => h.stateDir).filter((d) => existsSync(d)),
    procs: ps.filter((l) => hosts.some((h) => l.includes(`--root=${h.stateDir}`))),
    cgroups: ['', ...readdirSync('/sys/fs/cgroup')].flatMap((c) =>
      hosts.filter((h) => existsSync(join('/sys/fs/cgroup', c, h.cgroupParent))).map((h) => `${c}/${h.cgroupParent}`),
    ),
    netns: netns.filter(
      (n) => pids.some((p) => n === `fbxs-${p % 100000}`) || nets.some((x) => n.startsWith(x.netnsPrefix)),
    ),
    ifaces: readdirSync('/sys/class/net').filter(
      (n) => pids.some((p) => n === `fbxsh${p % 100000}`) || nets.some((x) => n.startsWith(x.ifacePrefix)),
    ),
  }
}

let child: ChildProcess | undefined
let stopping = false
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.on(sig, () => {
    // the seam run cleans up on its own; the worktrees go once it has
    stopping = true
    console.error(`before-after: ${sig}, stopping after the current run's cleanup`)
    child?.kill(sig)
  })

/** One seam.ts run in `side`'s tree; its samples by measurement. */
async function run(side: Side, round: number, pids: number[]): Promise<Record<string, number[]>> {
  const out = join(tmpdir(), `forkbox-seam-${process.pid}-${side.label}-${round}.json`)
  console.error(`\nbefore-after: round ${round}, ${side.label} (${side.describe})`)
  const p = spawn(process.execPath, ['--import', 'tsx', 'bench/seam.ts', '--out', out, ...passOn], {
    cwd: side.dir,
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  child = p
  if (p.pid) pids.push(p.pid)
  // its JSON summary: ours is the table at the end
  p.stdout?.pipe(process.stderr)
  const code = await new Promise<number | null>((r) => p.once('close', r))
  child = undefined
  if (code !== 0 || !existsSync(out)) throw new Error(`seam.ts in ${side.dir} exited with ${code}`)
  const result = JSON.parse(readFileSync(out, 'utf8')) as { code: string; samples: Record<string, number[]> }
  rmSync(out)
  if (!result.code.startsWith(`${side.dir}/`)) throw new Error(`the run in ${side.dir} measured ${result.code}`)
  return result.samples
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? Number.NaN
}
const ms = (x: number) => (x >= 100 ? x.toFixed(0) : x.toFixed(1))
const diff = (a: number, b: number) => `${b >= a ? '+' : ''}${(((b - a) / a) * 100).toFixed(1)}%`

function table(before: Side, after: Side): string {
  const names = [...new Set([...before.runs, ...after.runs].flatMap((r) => Object.keys(r)))]
  const lines = [
    `| measurement (ms) | before p50 | after p50 | Δ p50 | before p99 | after p99 | Δ p99 | p50 by run (${[...Array(rounds).keys()].map((i) => `b${i + 1} a${i + 1}`).join(' ')}) |`,
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
  ]
  for (const name of names) {
    const all = (s: Side) => s.runs.flatMap((r) => r[name] ?? [])
    const b = all(before)
    const a = all(after)
    const byRun = before.runs.flatMap((r, i) =>
      [r[name], after.runs[i]?.[name]].map((xs) => (xs ? ms(pct(xs, 50)) : '–')),
    )
    lines.push(
      `| ${name} (n=${b.length}/${a.length}) | ${ms(pct(b, 50))} | ${ms(pct(a, 50))} | ${diff(pct(b, 50), pct(a, 50))} | ${ms(pct(b, 99))} | ${ms(pct(a, 99))} | ${diff(pct(b, 99), pct(a, 99))} | ${byRun.join(' ')} |`,
    )
  }
  return lines.join('\n')
}

const t0 = performance.now()
const pids: number[] = []
let failed = false
try {
  const before = worktreeOf('before', beforeRef)
  const after = afterDir ? checkoutAt(afterDir) : worktreeOf('after', afterRef)
  const libs = [before, after].map((s) => readFileSync(join(s.dir, 'bench/lib.ts'), 'utf8'))
  if (libs[0] !== libs[1]) console.error('before-after: note: bench/lib.ts differs between the two trees')
  console.error(`before-after: trees ready in ${((performance.now() - t0) / 1000).toFixed(0)} s`)
  const load = loadavg()[0]?.toFixed(2)
  for (let round = 1; round <= rounds && !stopping; round++)
    for (const side of [before, after]) {
      if (stopping) break
      side.runs.push(await run(side, round, pids))
    }
  if (stopping) throw new Error('stopped')
  const minutes = ((performance.now() - t0) / 60_000).toFixed(1)
  const report = [
    `before: ${before.describe}`,
    `after:  ${after.describe}`,
    `${rounds} rounds alternating, ${minutes} min in all; load average ${load} at the start, ${loadavg()[0]?.toFixed(2)} at the end`,
    '',
    table(before, after),
  ].join('\n')
  const raw = join(tmpdir(), `forkbox-before-after-${new Date().toISOString().replace(/[:.]/g, '-')}.json`)
  writeFileSync(raw, JSON.stringify({ before, after, rounds }, null, 1))
  console.log(`\n${report}\n\n(raw samples: ${raw})`)
} catch (err) {
  failed = true
  console.error(`before-after: ${(err as Error).message}`)
} finally {
  removeWorktrees()
  const left = Object.entries(leftovers(pids)).filter(([, xs]) => xs.length > 0)
  if (left.length) {
    failed = true
    console.error(`before-after: left behind: ${JSON.stringify(Object.fromEntries(left))}`)
  } else console.error('before-after: worktrees removed; no sandboxes, netns, cgroups or runsc state left behind')
}
process.exitCode = failed ? 1 : 0
