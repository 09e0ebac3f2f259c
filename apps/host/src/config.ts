// Settings of a single-host forkbox (control plane + agent in one process), from env and options.
// Only the host's own defaults live here: the agent's and the server's fields are picked, defaults
// and all, from their schemas, so each default is written once.
import { AgentSettings } from '@forkbox/agent'
import { ServerConfig } from '@forkbox/server'
import { z } from 'zod'

export const HostConfig = z.object({
  port: z.number().int().min(0).max(65535).default(7411),
  host: z.string().default('127.0.0.1'),
  /** Templates built (if missing) before the server starts answering. */
  prebuild: z.array(z.string()).default(['base', 'code-interpreter']),
  ...AgentSettings.pick({
    dataDir: true,
    templatesDir: true,
    runscPath: true,
    runscStateDir: true,
    runscDebugDir: true,
    cgroupParent: true,
    poolSize: true,
    networkSubnet: true,
    networkAllowPrivate: true,
    dnsUpstreams: true,
    definitionsDir: true,
    insecureRegistries: true,
    buildCaBundle: true,
    layerCacheMB: true,
  }).shape,
  ...ServerConfig.pick({
    logLevel: true,
    maxSandboxes: true,
    idleTimeoutSeconds: true,
    idleAction: true,
    portsDomain: true,
    portsPathRoute: true,
    databaseUrl: true,
  }).shape,
})
export type HostConfig = z.infer<typeof HostConfig>
export type HostOptions = z.input<typeof HostConfig>

/** How an env var's text becomes the value the schema checks. */
type EnvKind = 'text' | 'number' | 'flag' | 'list'

const ENV: Record<string, [keyof HostConfig, EnvKind]> = {
  FORKBOX_PORT: ['port', 'number'],
  FORKBOX_HOST: ['host', 'text'],
  FORKBOX_DATA_DIR: ['dataDir', 'text'],
  FORKBOX_TEMPLATES_DIR: ['templatesDir', 'text'],
  FORKBOX_RUNSC: ['runscPath', 'text'],
  FORKBOX_RUNSC_STATE_DIR: ['runscStateDir', 'text'],
  FORKBOX_RUNSC_DEBUG_DIR: ['runscDebugDir', 'text'],
  FORKBOX_CGROUP_PARENT: ['cgroupParent', 'text'],
  FORKBOX_LOG_LEVEL: ['logLevel', 'text'],
  FORKBOX_MAX_SANDBOXES: ['maxSandboxes', 'number'],
  FORKBOX_POOL_SIZE: ['poolSize', 'number'],
  FORKBOX_PREBUILD: ['prebuild', 'list'],
  FORKBOX_IDLE_TIMEOUT_SECONDS: ['idleTimeoutSeconds', 'number'],
  FORKBOX_IDLE_ACTION: ['idleAction', 'text'],
  FORKBOX_NETWORK_SUBNET: ['networkSubnet', 'text'],
  FORKBOX_NETWORK_ALLOW_PRIVATE: ['networkAllowPrivate', 'list'],
  FORKBOX_DNS_UPSTREAMS: ['dnsUpstreams', 'list'],
  FORKBOX_INSECURE_REGISTRIES: ['insecureRegistries', 'list'],
  FORKBOX_BUILD_CA_BUNDLE: ['buildCaBundle', 'text'],
  FORKBOX_LAYER_CACHE_MB: ['layerCacheMB', 'number'],
  FORKBOX_PORTS_DOMAIN: ['portsDomain', 'text'],
  FORKBOX_PORTS_PATH_ROUTE: ['portsPathRoute', 'flag'],
  FORKBOX_DATABASE_URL: ['databaseUrl', 'text'],
}

function fromText(text: string, kind: EnvKind): string | number | boolean | string[] {
  switch (kind) {
    case 'text':
      return text
    case 'number':
      // text that is no number stays text: the schema then names the variable's field in its error
      return /^\s*-?\d+(\.\d+)?\s*$/.test(text) ? Number(text) : text
    case 'flag':
      return text === '1' || text === 'true' ? true : text === '0' || text === 'false' ? false : text
    case 'list':
      return text
        .split(',')
        .map((t) => t.trim())
        .filter(Boolean)
  }
}

/** Explicit options win over env vars, which win over defaults. */
export function loadHostConfig(opts: HostOptions = {}, env: NodeJS.ProcessEnv = process.env): HostConfig {
  const fromEnv: Record<string, unknown> = {}
  for (const [name, [key, kind]] of Object.entries(ENV)) {
    const text = env[name]
    if (text !== undefined && text !== '') fromEnv[key] = fromText(text, kind)
  }
  const defined = Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined))
  return HostConfig.parse({ ...fromEnv, ...defined })
}
