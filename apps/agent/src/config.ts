// The agent's settings and the one place their defaults live; the host reads env/flags once and
// passes them in (its own schema picks these fields, defaults included).
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { z } from 'zod'

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url))

export const AgentSettings = z.object({
  /** Per-sandbox bundle dirs live under `${dataDir}/sandboxes`. */
  dataDir: z.string().default('/var/lib/forkbox'),
  /** Built template rootfs cache (content-addressed; shareable between data dirs); default `${dataDir}/templates`. */
  templatesDir: z.string().optional(),
  /** Where template definitions (templates/NAME/template.json) are read from. */
  definitionsDir: z.string().default(`${repoRoot}templates`),
  runscPath: z.string().default('runsc'),
  platform: z.string().default('systrap'),
  /** runsc --root: container state. Kept apart from any other runsc user on the host. */
  runscStateDir: z.string().default('/run/forkbox/runsc'),
  /** An operator's switch: runsc's own debug logs (one file per command) go here, e.g. to time a restore. */
  runscDebugDir: z.string().optional(),
  /** Parent cgroup of every sandbox's cgroup. */
  cgroupParent: z
    .string()
    .regex(/^[A-Za-z0-9_.-]+$/)
    .default('forkbox'),
  mirror: z.string().default('http://deb.debian.org/debian'),
  /**
   * Registries (`host:port` or `host`) template images may be pulled from over plain HTTP or
   * unverified TLS; `localhost` and `127.0.0.1` always may, as in Docker.
   */
  insecureRegistries: z.array(z.string().regex(/^[A-Za-z0-9.-]+(?::\d{1,5})?$/)).default([]),
  /**
   * Registries (`host:port` or `host`) pulled from the host's own network, trusted with everything
   * it reaches (their token realms and redirects included). Every other pull runs in a network
   * namespace with a sandbox's egress rules: no loopback, private, link-local or host address.
   */
  registryAllow: z.array(z.string().regex(/^[A-Za-z0-9.-]+(?::\d{1,5})?$/)).default([]),
  /** Most MB one image may take pulled, or unpacked, on this host (a build past it fails with NO_SPACE). */
  maxImageMB: z
    .number()
    .int()
    .min(16)
    .default(16 * 1024),
  /**
   * A PEM bundle a template build's RUN steps trust (mounted read-only; named by SSL_CERT_FILE,
   * NODE_EXTRA_CA_CERTS, PIP_CERT, REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE), for a host whose
   * egress goes through a TLS-intercepting proxy. Default: the host's own bundle when the host
   * trusts a local CA (/usr/local/share/ca-certificates); `none`: never.
   */
  buildCaBundle: z.string().optional(),
  /** The build layer cache is evicted (least recently used first) down to this after each build. */
  layerCacheMB: z
    .number()
    .int()
    .min(0)
    .default(20 * 1024),
  /** apps/guest: the guest package and the code kernels, installed into every sandbox. */
  guestDir: z.string().default(`${repoRoot}apps/guest`),
  /** The host's Debian python3 the guest's own runtime is assembled from (images need no Python). */
  guestPython: z.string().default('/usr/bin/python3'),
  /**
   * A sandbox is frozen when idle only if it used at most this much of a core since it was last
   * looked at (gVisor's own timekeeping costs an idle sandbox ~2.2%; docs/design-notes.md).
   */
  freezeMaxCpuPercent: z.number().min(0).max(100).default(5),
  /**
   * The watchdog (sandboxes/watchdog.ts): a running guest not heard from for `heartbeatMs` is
   * pinged, and one that does not answer within `pingDeadlineMs` is errored `guest_unresponsive`.
   */
  watchdog: z
    .object({
      intervalMs: z.number().int().min(10).optional(),
      heartbeatMs: z.number().int().min(10).optional(),
      pingDeadlineMs: z.number().int().min(10).optional(),
    })
    .default({}),
  /** Restored, never-used sandboxes kept ready per template, at least (0 turns the pool off). */
  poolSize: z.number().int().min(0).max(64).default(2),
  /** At most this many per template: a pool grows toward its template's recent peak of creates. */
  poolMax: z.number().int().min(0).max(256).default(16),
  /** Host memory all pools together may hold (their pooled sandboxes' cgroups), in MB. */
  poolMemoryMB: z.number().int().min(0).default(4096),
  /** How long a burst of creates keeps its template's pool grown. */
  poolHistorySeconds: z.number().int().min(1).default(120),
  /** IPv4 block each sandbox's /30 is cut from (one per agent on a host). */
  networkSubnet: z.string().default('10.213.0.0/16'),
  /** Private ranges (CIDRs) the operator lets sandboxes with internet reach (all blocked otherwise). */
  networkAllowPrivate: z.array(z.string()).default([]),
  /** DNS servers (`ip` or `ip:port`) the sandboxes' resolver forwards to; empty: the host's resolv.conf. */
  dnsUpstreams: z.array(z.string().transform((u) => (u.includes(':') ? u : `${u}:53`))).default([]),
  /**
   * A directory on storage every host of a fleet mounts (NFS, ...): snapshots' and hibernated
   * sandboxes' images are kept there too, so they restore on any host, also when theirs is gone.
   */
  imageStore: z.string().optional(),
  /**
   * A fleet host: a built template's rootfs is hashed for the control plane's record, which other
   * hosts' copies of it are checked against. One host alone never sends it anywhere: no hash (an
   * 844 MB rootfs takes ~4 s to hash on this machine).
   */
  recordRootfsDigests: z.boolean().default(false),
  /** Network slots (namespace + veth) kept made ahead of creates. */
  spareNetworkSlots: z.number().int().min(0).default(4),
})
export type AgentConfigInput = z.input<typeof AgentSettings>
export type AgentConfig = Omit<z.output<typeof AgentSettings>, 'buildCaBundle'> & {
  templatesDir: string
  /** Null: builds trust only what their image does. */
  buildCaBundle: string | null
}

const HOST_BUNDLE = '/etc/ssl/certs/ca-certificates.crt'
const LOCAL_CAS = '/usr/local/share/ca-certificates'

/** The host's bundle when the host trusts a CA of its own (as update-ca-certificates adds it there). */
function hostCaBundle(): string | null {
  try {
    const local = readdirSync(LOCAL_CAS, { recursive: true }).some((n) => String(n).endsWith('.crt'))
    return local && existsSync(HOST_BUNDLE) ? HOST_BUNDLE : null
  } catch {
    return null
  }
}

/** The agent's settings: what `input` says, the defaults for the rest. */
export function defaultAgentConfig(input: AgentConfigInput = {}): AgentConfig {
  const c = AgentSettings.parse(input)
  const ca = c.buildCaBundle === undefined ? hostCaBundle() : c.buildCaBundle === 'none' ? null : c.buildCaBundle
  return { ...c, templatesDir: c.templatesDir ?? join(c.dataDir, 'templates'), buildCaBundle: ca }
}
