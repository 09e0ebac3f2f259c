// Settings of a single-host forkbox (control plane + agent in one process), from env and options.
import { z } from 'zod'

const list = z.union([
  z.array(z.string()),
  z.string().transform((s) =>
    s
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean),
  ),
])

export const HostConfig = z.object({
  port: z.coerce.number().int().min(0).max(65535).default(7411),
  host: z.string().default('127.0.0.1'),
  dataDir: z.string().default('/var/lib/forkbox'),
  templatesDir: z.string().optional(),
  runscPath: z.string().default('runsc'),
  runscStateDir: z.string().default('/run/forkbox/runsc'),
  cgroupParent: z
    .string()
    .regex(/^[A-Za-z0-9_.-]+$/)
    .default('forkbox'),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Templates built (if missing) before the server starts answering. */
  prebuild: z
    .union([
      z.array(z.string()),
      z.string().transform((s) =>
        s
          .split(',')
          .map((t) => t.trim())
          .filter(Boolean),
      ),
    ])
    .default(['base', 'code-interpreter']),
  maxSandboxes: z.coerce.number().int().positive().default(150),
  /** Restored, never-used sandboxes kept ready per template; 0 turns the pool off. */
  poolSize: z.coerce.number().int().min(0).max(64).default(2),
  /** Hibernate (or kill) a non-persistent sandbox after this long without a request; 0: never. */
  idleTimeoutSeconds: z.coerce.number().int().min(0).default(600),
  idleAction: z.enum(['hibernate', 'kill']).default('hibernate'),
  /** IPv4 block the sandboxes' addresses come from (a /30 each); one per forkbox on a host. */
  networkSubnet: z.string().default('10.213.0.0/16'),
  /** Private ranges (CIDRs) sandboxes with internet may reach; all private ranges are blocked otherwise. */
  networkAllowPrivate: list.default([]),
  /** DNS servers (`ip` or `ip:port`) the sandboxes' resolver asks; default: the host's resolv.conf. */
  dnsUpstreams: list.default([]),
  /** Exposed ports are served at `{port}-{id}.{portsDomain}` on this server's port, each its own origin. */
  portsDomain: z
    .string()
    .regex(/^[a-z0-9.-]+$/i)
    .default('localhost'),
  /** Also serve exposed ports at `/s/{id}/{port}/` on the API's origin (one origin for all sandboxes). */
  portsPathRoute: z
    .union([z.boolean(), z.enum(['1', 'true', '0', 'false']).transform((v) => v === '1' || v === 'true')])
    .default(false),
})
export type HostConfig = z.infer<typeof HostConfig>
export type HostOptions = z.input<typeof HostConfig>

const ENV: Record<string, keyof HostConfig> = {
  FORKBOX_PORT: 'port',
  FORKBOX_HOST: 'host',
  FORKBOX_DATA_DIR: 'dataDir',
  FORKBOX_TEMPLATES_DIR: 'templatesDir',
  FORKBOX_RUNSC: 'runscPath',
  FORKBOX_RUNSC_STATE_DIR: 'runscStateDir',
  FORKBOX_CGROUP_PARENT: 'cgroupParent',
  FORKBOX_LOG_LEVEL: 'logLevel',
  FORKBOX_MAX_SANDBOXES: 'maxSandboxes',
  FORKBOX_POOL_SIZE: 'poolSize',
  FORKBOX_PREBUILD: 'prebuild',
  FORKBOX_IDLE_TIMEOUT_SECONDS: 'idleTimeoutSeconds',
  FORKBOX_IDLE_ACTION: 'idleAction',
  FORKBOX_NETWORK_SUBNET: 'networkSubnet',
  FORKBOX_NETWORK_ALLOW_PRIVATE: 'networkAllowPrivate',
  FORKBOX_DNS_UPSTREAMS: 'dnsUpstreams',
  FORKBOX_PORTS_DOMAIN: 'portsDomain',
  FORKBOX_PORTS_PATH_ROUTE: 'portsPathRoute',
}

/** Explicit options win over env vars, which win over defaults. */
export function loadHostConfig(opts: HostOptions = {}, env: NodeJS.ProcessEnv = process.env): HostConfig {
  const fromEnv: Record<string, unknown> = {}
  for (const [name, key] of Object.entries(ENV))
    if (env[name] !== undefined && env[name] !== '') fromEnv[key] = env[name]
  const defined = Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined))
  return HostConfig.parse({ ...fromEnv, ...defined })
}
