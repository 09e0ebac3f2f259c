// The guest's own Python: the host's Debian python3 with its standard library and every shared
// library it loads, relinked to load only from where it is mounted in sandboxes. The guest then
// runs in any image — one without Python, without a libc, or with musl — and never imports a
// module the image could have replaced.
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { cpSync, existsSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync } from 'node:fs'
import { basename, join, relative } from 'node:path'

/** Where the runtime is mounted in every sandbox (inside the guest dir, read-only). */
export const RUNTIME_MOUNT = '/opt/forkbox/runtime'
/** The guest's interpreter inside sandboxes. */
export const RUNTIME_PYTHON = `${RUNTIME_MOUNT}/bin/python3`
/** Bumped when what goes into a runtime changes, so every host assembles it anew. */
const RECIPE_VERSION = 1

/** Parts of the standard library the guest never imports (tests, GUIs, tools), and modules needing libraries it has no use for. */
const SKIPPED = new Set([
  'test',
  'idlelib',
  'tkinter',
  'turtledemo',
  'ensurepip',
  'lib2to3',
  'pydoc_data',
  'site-packages',
  'dist-packages',
  'EXTERNALLY-MANAGED',
])
const SKIPPED_EXTENSIONS =
  /^(_test|xx|_dbm|_gdbm|nis|_curses|readline|_crypt|_sqlite3|audioop|ossaudiodev|_tkinter|_ctypes_test)/

export interface GuestRuntime {
  /** Host dir mounted at RUNTIME_MOUNT. */
  dir: string
  /** Of the interpreter's content and the recipe: part of every baked snapshot's key. */
  hash: string
}

function python(exe: string, code: string): string {
  return execFileSync(exe, ['-S', '-c', code], { encoding: 'utf8' }).trim()
}

/** The shared libraries `file` loads (ldd's resolution, which is the host loader's own). */
function sharedLibraries(file: string): string[] {
  const out = execFileSync('ldd', [file], { encoding: 'utf8' })
  const libs: string[] = []
  for (const line of out.split('\n')) {
    const m = /=>\s*(\/\S+)/.exec(line) ?? /^\s*(\/\S*ld-linux\S*)/.exec(line)
    if (m?.[1]) libs.push(m[1])
  }
  return libs
}

/**
 * Assembles the runtime from `hostPython` into `templatesDir/runtime-<hash>` once (beside it,
 * then renamed, so a half-made one is never mounted). Needs `ldd` and `patchelf` on the host.
 */
export function installGuestRuntime(templatesDir: string, hostPython: string): GuestRuntime {
  const exe = realpathSync(hostPython)
  const hash = createHash('sha256')
    .update(`${RECIPE_VERSION}\0${exe}\0`)
    .update(readFileSync(exe))
    .digest('hex')
    .slice(0, 16)
  const dir = join(templatesDir, `runtime-${hash}`)
  if (existsSync(dir)) return { dir, hash }
  const tmp = `${dir}.tmp-${process.pid}`
  rmSync(tmp, { recursive: true, force: true })
  try {
    const stdlib = python(exe, 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
    const dynload = python(exe, 'import sysconfig; print(sysconfig.get_config_var("DESTSHARED"))')
    const version = basename(stdlib)
    const libDir = join(tmp, 'lib')
    const tmpStdlib = join(libDir, version)
    mkdirSync(join(tmp, 'bin'), { recursive: true })
    // timestamps kept: the stdlib's compiled .pyc files are checked against their sources' mtimes
    cpSync(stdlib, tmpStdlib, {
      recursive: true,
      preserveTimestamps: true,
      filter: (src) => {
        const rel = relative(stdlib, src)
        if (SKIPPED.has(rel.split('/')[0] ?? '')) return false
        return !(src.startsWith(dynload) && SKIPPED_EXTENSIONS.test(basename(src)))
      },
    })
    if (!dynload.startsWith(stdlib))
      cpSync(dynload, join(tmpStdlib, 'lib-dynload'), {
        recursive: true,
        preserveTimestamps: true,
        filter: (src) => !SKIPPED_EXTENSIONS.test(basename(src)),
      })
    const bin = join(tmp, 'bin/python3')
    cpSync(exe, bin)
    const extensions = execFileSync('find', [join(tmpStdlib, 'lib-dynload'), '-name', '*.so'], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
    const libs = new Set<string>()
    for (const f of [exe, ...extensions]) for (const lib of sharedLibraries(f)) libs.add(lib)
    for (const lib of libs) cpSync(lib, join(libDir, basename(lib)), { dereference: true })
    const loader = [...libs].find((l) => /ld-linux[^/]*\.so/.test(l))
    if (!loader) throw new Error(`${exe} names no ELF loader`)
    // DT_RPATH (not RUNPATH): searched before LD_LIBRARY_PATH, and for every library loaded after
    execFileSync('patchelf', [
      '--set-interpreter',
      join(RUNTIME_MOUNT, 'lib', basename(loader)),
      '--force-rpath',
      '--set-rpath',
      join(RUNTIME_MOUNT, 'lib'),
      bin,
    ])
    renameSync(tmp, dir)
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true })
    if (existsSync(dir)) return { dir, hash }
    throw new Error(`cannot assemble the guest's Python runtime from ${exe}: ${String(err)}`)
  }
  return { dir, hash }
}
