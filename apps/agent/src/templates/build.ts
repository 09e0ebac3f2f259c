// Builds a template rootfs once: debootstrap minbase, then apt-get the template's packages in a
// chroot, into a temp dir that is renamed into the cache only when complete.
import { spawn } from 'node:child_process'
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import type { TemplateProgress } from '@forkbox/protocol'
import { GUEST_DIR } from '../runtime/oci-spec.ts'
import type { TemplateDefinition } from './definition.ts'

export interface BuildOptions {
  mirror: string
  debCacheDir: string
  onProgress?: (p: TemplateProgress) => void
}

function runStep(cmd: string, args: string[], onLine: (line: string) => void, env?: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
    let tail: string[] = []
    const feed = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.trim()) continue
        tail = [...tail.slice(-19), line]
        onLine(line)
      }
    }
    child.stdout.on('data', feed)
    child.stderr.on('data', feed)
    child.on('error', reject)
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`${cmd} ${args[0]} failed (exit ${code}):\n${tail.join('\n')}`)),
    )
  })
}

export async function buildRootfs(def: TemplateDefinition, target: string, opts: BuildOptions): Promise<void> {
  const progress = (phase: string, fraction?: number, message?: string) =>
    opts.onProgress?.({ template: def.name, phase, fraction, message })
  const tmp = `${target}.building-${process.pid}`
  rmSync(tmp, { recursive: true, force: true })
  mkdirSync(opts.debCacheDir, { recursive: true })
  try {
    // debootstrap prints "I: Retrieving X" / "I: Extracting X" / "I: Unpacking/Configuring X" per package;
    // minbase has ~90 packages, each seen about four times.
    let seen = 0
    progress('debootstrap', 0, 'starting')
    await runStep(
      'debootstrap',
      ['--variant=minbase', `--cache-dir=${opts.debCacheDir}`, def.suite, tmp, opts.mirror],
      (line) => {
        const m = /^I: (\w+) (\S+)/.exec(line)
        if (!m) return
        seen += 1
        progress('debootstrap', Math.min(0.99, seen / 360), `${m[1]} ${m[2]}`)
      },
    )
    progress('debootstrap', 1, 'base system ready')
    // apt in the chroot resolves through the host's resolver; the sandbox gets its own at the end
    copyFileSync('/etc/resolv.conf', join(tmp, 'etc/resolv.conf'))
    writeFileSync(join(tmp, 'etc/hostname'), 'sandbox\n')
    // the names a sandbox has, answered without a resolver (one without network would wait for it)
    writeFileSync(
      join(tmp, 'etc/hosts'),
      '127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n',
    )
    writeFileSync(join(tmp, 'usr/sbin/policy-rc.d'), '#!/bin/sh\nexit 101\n', { mode: 0o755 })
    const chrootEnv = { DEBIAN_FRONTEND: 'noninteractive', LANG: 'C.UTF-8' }
    let installed = 0
    progress('packages', 0, def.packages.join(' '))
    await runStep(
      'chroot',
      [tmp, 'apt-get', 'install', '-y', '--no-install-recommends', '-o', 'Dpkg::Use-Pty=0', ...def.packages],
      (line) => {
        if (/^(Unpacking|Setting up) /.test(line)) {
          installed += 1
          progress('packages', Math.min(0.99, installed / (def.packages.length * 4)), line)
        }
      },
      chrootEnv,
    )
    await runStep(
      'chroot',
      [tmp, 'useradd', '--create-home', '--uid', '1000', '--shell', '/bin/bash', '--groups', 'sudo', def.user],
      () => {},
    )
    // gVisor ignores set-user-ID bits, so Debian's sudo cannot work: the guest serves sudo (in
    // every sandbox at GUEST_DIR), password-less for the sudo group, as in E2B's templates
    rmSync(join(tmp, 'usr/bin/sudo'), { force: true })
    symlinkSync(`${GUEST_DIR}/forkbox_sudo.py`, join(tmp, 'usr/bin/sudo'))
    leanProfile(join(tmp, 'etc/profile'))
    await runStep('chroot', [tmp, 'apt-get', 'clean'], () => {}, chrootEnv)
    rmSync(join(tmp, 'var/lib/apt/lists'), { recursive: true, force: true })
    mkdirSync(join(tmp, 'var/lib/apt/lists/partial'), { recursive: true })
    mkdirSync(join(tmp, 'opt/forkbox'), { recursive: true })
    writeFileSync(join(tmp, 'opt/forkbox/guest.py'), '')
    mkdirSync(join(tmp, 'work'), { recursive: true })
    writeFileSync(join(tmp, 'etc/resolv.conf'), 'nameserver 127.0.0.1\n')
    progress('packages', 1, 'installed')
    if (existsSync(target)) {
      // another process finished the same content-addressed build first: theirs is as good as ours
      rmSync(tmp, { recursive: true, force: true })
    } else {
      renameSync(tmp, target)
    }
    progress('done', 1, target)
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true })
    throw err
  }
}

/**
 * A login shell (`bash -l`: E2B's commands, `forkbox exec` with a string) reads /etc/profile, and
 * Debian's asks `id -u` for the user: a process start, ~30 ms under gVisor, on every command. Bash
 * knows the answer already (`$EUID`); other shells still ask.
 */
export function leanProfile(path: string): void {
  if (!existsSync(path)) return
  const text = readFileSync(path, 'utf8')
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, written as is
  const lean = text.replaceAll('"$(id -u)"', '"${EUID:-$(id -u)}"')
  if (lean !== text) writeFileSync(path, lean)
}
