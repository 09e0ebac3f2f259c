// The agent's settings; the host process reads them from env/flags once and passes them in.
import { fileURLToPath } from 'node:url'

export interface AgentConfig {
  /** Per-sandbox bundle dirs live under `${dataDir}/sandboxes`. */
  dataDir: string
  /** Built template rootfs cache (content-addressed); shareable between data dirs. */
  templatesDir: string
  /** Where template definitions (templates/NAME/template.json) are read from. */
  definitionsDir: string
  runscPath: string
  platform: string
  /** runsc --root: container state. Kept apart from any other runsc user on the host. */
  runscStateDir: string
  /** Parent cgroup of every sandbox's cgroup. */
  cgroupParent: string
  mirror: string
  /** apps/guest: the guest package and the code kernels, installed into every sandbox. */
  guestDir: string
  /** Restored, never-used sandboxes kept ready per template (0 turns the pool off). */
  poolSize: number
  /** IPv4 block each sandbox's /30 is cut from (one per agent on a host). */
  networkSubnet: string
  /** Private ranges the operator lets sandboxes with internet reach (blocked otherwise). */
  networkAllowPrivate: string[]
  /** `host:port` DNS servers the sandboxes' resolver forwards to; empty: the host's resolv.conf. */
  dnsUpstreams: string[]
  /** Network slots (namespace + veth) kept made ahead of creates. */
  spareNetworkSlots: number
}

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url))

export function defaultAgentConfig(overrides: Partial<AgentConfig> = {}): AgentConfig {
  const dataDir = overrides.dataDir ?? '/var/lib/forkbox'
  return {
    dataDir,
    templatesDir: `${dataDir}/templates`,
    definitionsDir: `${repoRoot}templates`,
    runscPath: 'runsc',
    platform: 'systrap',
    runscStateDir: '/run/forkbox/runsc',
    cgroupParent: 'forkbox',
    mirror: 'http://deb.debian.org/debian',
    guestDir: `${repoRoot}apps/guest`,
    poolSize: 2,
    networkSubnet: '10.213.0.0/16',
    networkAllowPrivate: [],
    dnsUpstreams: [],
    spareNetworkSlots: 4,
    ...overrides,
  }
}
