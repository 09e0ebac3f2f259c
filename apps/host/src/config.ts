// Settings of a single-host forkbox (control plane + agent in one process), from env and options.
// Only the host's own defaults live here: the agent's and the server's fields are picked, defaults
// and all, from their schemas, so each default is written once.

import { join } from 'node:path'
import { AgentSettings } from '@forkbox/agent'
import { ServerConfig, type ServerConfigInput } from '@forkbox/server'
import { z } from 'zod'

/** The agent's settings a host passes through (one box and a fleet's host alike). */
const AGENT_FIELDS = {
  dataDir: true,
  templatesDir: true,
  runscPath: true,
  runscStateDir: true,
  runscDebugDir: true,
  cgroupParent: true,
  poolSize: true,
  poolMax: true,
  poolMemoryMB: true,
  poolHistorySeconds: true,
  freezeMaxCpuPercent: true,
  networkSubnet: true,
  networkAllowPrivate: true,
  dnsUpstreams: true,
  definitionsDir: true,
  insecureRegistries: true,
  registryAllow: true,
  maxImageMB: true,
  buildCaBundle: true,
  layerCacheMB: true,
} as const

/** The agent's part of a host's settings, as the agent takes them. */
export function agentSettingsOf(config: z.infer<ReturnType<typeof AgentSettings.pick<typeof AGENT_FIELDS>>>) {
  const out: Record<string, unknown> = {}
  for (const k of Object.keys(AGENT_FIELDS)) out[k] = config[k as keyof typeof AGENT_FIELDS]
  return out as z.infer<ReturnType<typeof AgentSettings.pick<typeof AGENT_FIELDS>>>
}

/** HTTPS on the API's port: both PEM files, or neither (plain HTTP, e.g. behind a TLS-terminating load balancer). */
const TLS_FIELDS = {
  /** A certificate chain covering the API's name and `*.{sandboxDomain}` (a wildcard). */
  tlsCertFile: z.string().optional(),
  tlsKeyFile: z.string().optional(),
}

const tlsBoth = (c: { tlsCertFile?: string; tlsKeyFile?: string }) =>
  (c.tlsCertFile === undefined) === (c.tlsKeyFile === undefined)
const TLS_BOTH = { message: 'TLS needs both tlsCertFile and tlsKeyFile (FORKBOX_TLS_CERT, FORKBOX_TLS_KEY)' }

/** The server's TLS files, when it serves HTTPS itself. */
export function tlsOf(c: { tlsCertFile?: string; tlsKeyFile?: string }) {
  return c.tlsCertFile && c.tlsKeyFile ? { certFile: c.tlsCertFile, keyFile: c.tlsKeyFile } : undefined
}

/**
 * The server's settings every control-plane host passes through (`forkbox up` and a replica
 * alike): a server setting a host offers is added here, once.
 */
const SERVER_FIELDS = {
  logLevel: true,
  maxSandboxes: true,
  idleTimeoutSeconds: true,
  idleAction: true,
  freezeAfterSeconds: true,
  sandboxDomain: true,
  portsPathRoute: true,
  databaseUrl: true,
  corsOrigins: true,
  rateLimitCreate: true,
  rateLimitData: true,
  auditRetentionDays: true,
  e2bSignedUrlMaxSeconds: true,
} as const

/** The server's settings only a replica takes: hosts joining it, and a store shared with other replicas. */
const REPLICA_FIELDS = {
  joinToken: true,
  secretPath: true,
  hostGraceSeconds: true,
  startingTimeoutSeconds: true,
} as const

/** What a host serving a control plane takes: where it listens, its data dir, and the server's settings. */
const CONTROL_PLANE_HOST_FIELDS = {
  port: z.number().int().min(0).max(65535).default(7411),
  host: z.string().default('127.0.0.1'),
  /** The SQLite file's dir without a database URL; build scratch space either way. */
  dataDir: AgentSettings.shape.dataDir,
  ...ServerConfig.pick(SERVER_FIELDS).shape,
  ...TLS_FIELDS,
}
export type ControlPlaneHostSettings = z.infer<z.ZodObject<typeof CONTROL_PLANE_HOST_FIELDS>>

export const HostConfig = z
  .object({
    ...CONTROL_PLANE_HOST_FIELDS,
    /** Templates built (if missing) before the server starts answering. */
    prebuild: z.array(z.string()).default(['base', 'code-interpreter']),
    ...AgentSettings.pick(AGENT_FIELDS).shape,
  })
  .refine(tlsBoth, TLS_BOTH)
export type HostConfig = z.infer<typeof HostConfig>
export type HostOptions = z.input<typeof HostConfig>

/** `forkbox agent`: one host of a fleet, serving its sandboxes to the control plane it joins. */
export const AgentHostConfig = z.object({
  port: z.number().int().min(0).max(65535).default(7412),
  host: z.string().default('0.0.0.0'),
  /** Where the control plane reaches this agent (default: `http://{host}:{port}`, loopback for 0.0.0.0). */
  advertiseUrl: z.string().url().optional(),
  /** The control plane to join (any replica, or the load balancer in front of them). */
  controlPlaneUrl: z.string().url(),
  joinToken: z.string().min(16),
  /** Stable across restarts: a restarted agent takes its sandboxes back under it. */
  hostId: z
    .string()
    .regex(/^[a-z0-9][a-z0-9.-]{0,62}$/)
    .optional(),
  /** The most sandboxes this host runs at once. */
  maxSandboxes: z.number().int().positive().default(150),
  prebuild: z.array(z.string()).default(['base', 'code-interpreter']),
  logLevel: ServerConfig.shape.logLevel,
  ...AgentSettings.pick(AGENT_FIELDS).shape,
  imageStore: AgentSettings.shape.imageStore,
})
export type AgentHostConfig = z.infer<typeof AgentHostConfig>
export type AgentHostOptions = z.input<typeof AgentHostConfig>

/** `forkbox server`: a control-plane replica with no agent of its own; hosts join it. */
export const ServerHostConfig = z
  .object({
    ...CONTROL_PLANE_HOST_FIELDS,
    /** The fleet's cap across hosts (each host has its own). */
    maxSandboxes: z.number().int().positive().default(100_000),
    ...ServerConfig.pick(REPLICA_FIELDS).shape,
  })
  .refine(tlsBoth, TLS_BOTH)
export type ServerHostConfig = z.infer<typeof ServerHostConfig>
export type ServerHostOptions = z.input<typeof ServerHostConfig>

/** How an env var's text becomes the value the schema checks. */
type EnvKind = 'text' | 'number' | 'flag' | 'list'

type AnyKey = keyof HostConfig | keyof AgentHostConfig | keyof ServerHostConfig

const ENV: Record<string, [AnyKey, EnvKind]> = {
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
  FORKBOX_POOL_MAX: ['poolMax', 'number'],
  FORKBOX_POOL_MEMORY_MB: ['poolMemoryMB', 'number'],
  FORKBOX_POOL_HISTORY_SECONDS: ['poolHistorySeconds', 'number'],
  FORKBOX_PREBUILD: ['prebuild', 'list'],
  FORKBOX_IDLE_TIMEOUT_SECONDS: ['idleTimeoutSeconds', 'number'],
  FORKBOX_IDLE_ACTION: ['idleAction', 'text'],
  FORKBOX_FREEZE_AFTER_SECONDS: ['freezeAfterSeconds', 'number'],
  FORKBOX_FREEZE_MAX_CPU_PERCENT: ['freezeMaxCpuPercent', 'number'],
  FORKBOX_NETWORK_SUBNET: ['networkSubnet', 'text'],
  FORKBOX_NETWORK_ALLOW_PRIVATE: ['networkAllowPrivate', 'list'],
  FORKBOX_DNS_UPSTREAMS: ['dnsUpstreams', 'list'],
  FORKBOX_INSECURE_REGISTRIES: ['insecureRegistries', 'list'],
  FORKBOX_REGISTRY_ALLOW: ['registryAllow', 'list'],
  FORKBOX_MAX_IMAGE_MB: ['maxImageMB', 'number'],
  FORKBOX_BUILD_CA_BUNDLE: ['buildCaBundle', 'text'],
  FORKBOX_LAYER_CACHE_MB: ['layerCacheMB', 'number'],
  // its name before the E2B data plane was served on it too (the later entry wins when both are set)
  FORKBOX_PORTS_DOMAIN: ['sandboxDomain', 'text'],
  FORKBOX_SANDBOX_DOMAIN: ['sandboxDomain', 'text'],
  FORKBOX_PORTS_PATH_ROUTE: ['portsPathRoute', 'flag'],
  FORKBOX_DATABASE_URL: ['databaseUrl', 'text'],
  FORKBOX_JOIN_TOKEN: ['joinToken', 'text'],
  FORKBOX_CONTROL_PLANE_URL: ['controlPlaneUrl', 'text'],
  FORKBOX_ADVERTISE_URL: ['advertiseUrl', 'text'],
  FORKBOX_HOST_ID: ['hostId', 'text'],
  FORKBOX_SECRET_FILE: ['secretPath', 'text'],
  FORKBOX_HOST_GRACE_SECONDS: ['hostGraceSeconds', 'number'],
  FORKBOX_STARTING_TIMEOUT_SECONDS: ['startingTimeoutSeconds', 'number'],
  FORKBOX_IMAGE_STORE: ['imageStore', 'text'],
  FORKBOX_TLS_CERT: ['tlsCertFile', 'text'],
  FORKBOX_TLS_KEY: ['tlsKeyFile', 'text'],
  FORKBOX_CORS_ORIGINS: ['corsOrigins', 'list'],
  FORKBOX_RATE_LIMIT_CREATE: ['rateLimitCreate', 'text'],
  FORKBOX_RATE_LIMIT_DATA: ['rateLimitData', 'text'],
  FORKBOX_AUDIT_RETENTION_DAYS: ['auditRetentionDays', 'number'],
  FORKBOX_E2B_SIGNED_URL_MAX_SECONDS: ['e2bSignedUrlMaxSeconds', 'number'],
}

/**
 * The control plane's settings out of a host's config (`forkbox up`'s or a replica's): every
 * field the server's config has, by name.
 */
export function serverSettingsOf(config: ControlPlaneHostSettings): ServerConfigInput {
  const shared = Object.entries(config).filter(([k]) => k in ServerConfig.shape)
  return { ...Object.fromEntries(shared), dbPath: join(config.dataDir, 'forkbox.db') }
}

/** Every variable a host reads (the deployment files must name only these). */
export const ENV_VARS: readonly string[] = Object.keys(ENV)

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

/** Explicit options win over env vars, which win over defaults; a variable the schema lacks is left out. */
function load<S extends z.ZodObject>(schema: S, opts: object, env: NodeJS.ProcessEnv): z.infer<S> {
  const fromEnv: Record<string, unknown> = {}
  for (const [name, [key, kind]] of Object.entries(ENV)) {
    const text = env[name]
    if (text !== undefined && text !== '' && key in schema.shape) fromEnv[key] = fromText(text, kind)
  }
  const defined = Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined))
  return schema.parse({ ...fromEnv, ...defined })
}

export function loadHostConfig(opts: HostOptions = {}, env: NodeJS.ProcessEnv = process.env): HostConfig {
  return load(HostConfig, opts, env)
}

export function loadAgentHostConfig(
  opts: Partial<AgentHostOptions> = {},
  env: NodeJS.ProcessEnv = process.env,
): AgentHostConfig {
  return load(AgentHostConfig, opts, env)
}

export function loadServerHostConfig(
  opts: ServerHostOptions = {},
  env: NodeJS.ProcessEnv = process.env,
): ServerHostConfig {
  return load(ServerHostConfig, opts, env)
}
