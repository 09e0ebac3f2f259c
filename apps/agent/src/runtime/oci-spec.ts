// The OCI config.json of one sandbox: read-only template rootfs, sized tmpfs for the writable
// homes, the guest daemon as init, and the cgroup limits runsc only applies with cgroupsPath.
import type { ResolvedResources } from '@forkbox/protocol'
import { RUNTIME_MOUNT, RUNTIME_PYTHON } from '../guest/runtime.ts'
import type { KernelSettings } from '../templates/definition.ts'

const MiB = 1024 * 1024
/** Memory the Sentry and gofer need on top of what the guest may use. */
export const SENTRY_OVERHEAD_BYTES = 160 * MiB
/** The guest daemon and its code kernel, bind-mounted read-only into every sandbox. */
export const GUEST_DIR = '/opt/forkbox'
/** The guest package's entry point: run as a script, it imports the package from GUEST_DIR. */
export const GUEST_MAIN_PATH = `${GUEST_DIR}/forkbox_guest/__main__.py`
/** The nameserver in every sandbox's resolv.conf. Any address would do (the host redirects all of a
 * sandbox's port 53 to the platform's resolver); this one is the customary cloud DNS address. */
export const SANDBOX_NAMESERVER = '169.254.169.253'

const CAPS = [
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_FOWNER',
  'CAP_FSETID',
  'CAP_KILL',
  'CAP_SETGID',
  'CAP_SETUID',
  'CAP_SETPCAP',
  'CAP_SYS_CHROOT',
  'CAP_AUDIT_WRITE',
]

export interface SpecInput {
  rootfs: string
  /** Host dir holding the forkbox_guest package and the code kernels. */
  guestDir: string
  /** Host dir of the guest's own Python (guest/runtime.ts), mounted inside the guest dir. */
  runtimeDir: string
  /** The template's code kernels: Python they run at start (imports that cells then find warm), and whether new contexts are forked warm. */
  kernel?: KernelSettings
  cgroupsPath: string
  /** The network namespace (with its veth) runsc takes the sandbox's interface from. */
  netnsPath: string
  hostname: string
  resources: ResolvedResources
  /** A template build's sandbox: see `BuildMounts`. */
  build?: BuildMounts
  /** A user's image: its default user and working dir, and its own /home, /tmp and /work (no tmpfs over them). */
  image?: ImageDefaults
  /** Default true: processes get RLIMIT_AS = the memory limit (see the template definition). */
  limitAddressSpace?: boolean
}

export interface ImageDefaults {
  user: string
  workdir?: string
}

/**
 * A build sandbox's root is a host overlay's merged dir whose writes must land in its upper dir:
 * no tmpfs over /home, /tmp and /work, and the given host dirs bound read-only (the build context,
 * another stage's rootfs) for the build's copy steps to read inside the sandbox.
 */
export interface BuildMounts {
  readOnly: { destination: string; source: string }[]
}

export function cgroupLimits(r: ResolvedResources): { memoryBytes: number; pids: number } {
  return { memoryBytes: r.memoryMB * MiB + SENTRY_OVERHEAD_BYTES, pids: r.pids }
}

export function guestLimits(r: ResolvedResources): { asBytes: number; nproc: number } {
  return {
    asBytes: r.memoryMB * MiB,
    nproc: Math.max(64, Math.floor(r.pids / 4)),
  }
}

export function buildSpec(input: SpecInput): Record<string, unknown> {
  const r = input.resources
  const limits = guestLimits(r)
  const tmpfs = (destination: string, mode: string) => ({
    destination,
    type: 'tmpfs',
    source: 'tmpfs',
    options: [`size=${r.diskMB}m`, `mode=${mode}`, 'nosuid', 'nodev'],
  })
  return {
    ociVersion: '1.0.0',
    process: {
      terminal: false,
      user: { uid: 0, gid: 0 },
      args: [RUNTIME_PYTHON, '-u', '-S', GUEST_MAIN_PATH],
      env: [
        'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
        'LANG=C.UTF-8',
        ...(input.limitAddressSpace === false ? [] : [`FORKBOX_RLIMIT_AS=${limits.asBytes}`]),
        `FORKBOX_RLIMIT_NPROC=${limits.nproc}`,
        `FORKBOX_NAMESERVER=${SANDBOX_NAMESERVER}`,
        ...(input.kernel?.preload ? [`FORKBOX_KERNEL_PRELOAD=${input.kernel.preload}`] : []),
        ...(input.kernel && input.kernel.zygote !== 'lazy' ? [`FORKBOX_CONTEXT_ZYGOTE=${input.kernel.zygote}`] : []),
        ...(input.image ? [`FORKBOX_DEFAULT_USER=${input.image.user}`] : []),
        ...(input.image?.workdir ? [`FORKBOX_DEFAULT_CWD=${input.image.workdir}`] : []),
      ],
      cwd: '/',
      capabilities: { bounding: CAPS, effective: CAPS, permitted: CAPS },
      rlimits: [{ type: 'RLIMIT_NOFILE', hard: 65536, soft: 65536 }],
      // runsc keeps every sandbox process no-new-privileges whatever this says ("assumed to always
      // be set"): a setuid program (sudo, su) cannot raise a process's rights in gVisor
      noNewPrivileges: true,
    },
    root: { path: input.rootfs, readonly: false },
    hostname: input.hostname,
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'mode=755'] },
      { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
      ...(input.build
        ? input.build.readOnly.map((m) => ({ ...m, type: 'bind', options: ['rbind', 'ro'] }))
        : input.image
          ? []
          : [tmpfs('/home', '755'), tmpfs('/tmp', '1777'), tmpfs('/work', '755')]),
      {
        destination: GUEST_DIR,
        type: 'bind',
        source: input.guestDir,
        options: ['rbind', 'ro'],
      },
      { destination: RUNTIME_MOUNT, type: 'bind', source: input.runtimeDir, options: ['rbind', 'ro'] },
    ],
    linux: {
      cgroupsPath: input.cgroupsPath,
      resources: {
        memory: { limit: cgroupLimits(r).memoryBytes },
        pids: { limit: cgroupLimits(r).pids },
        cpu: { quota: Math.round(r.vcpus * 100_000), period: 100_000 },
      },
      namespaces: [
        { type: 'pid' },
        { type: 'network', path: input.netnsPath },
        { type: 'ipc' },
        { type: 'uts' },
        { type: 'mount' },
      ],
    },
  }
}
