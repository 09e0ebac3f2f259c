// The control plane's settings, validated once; the host passes them in.
import type { RateLimit } from '@forkbox/protocol'
import { z } from 'zod'

/** A rate limit setting: `perSecond/burst` (`10/50`), or `off`. */
const RateSetting = z.string().regex(/^(off|\d+(\.\d+)?\/\d+)$/, 'a rate limit is perSecond/burst (e.g. 10/50) or off')

/** A rate limit setting as the limiter takes it (null: off). */
export function rateOf(setting: string): RateLimit | null {
  if (setting === 'off') return null
  const [perSecond, burst] = setting.split('/').map(Number)
  return perSecond && burst ? { perSecond, burst } : null
}

/** A year: past that a capped URL is as good as never-expiring (say `off`). */
const MAX_SIGNED_URL_SECONDS = 365 * 24 * 3600

export const ServerConfig = z.object({
  /** The SQLite file (one box); the server secret and build scratch dirs live beside it either way. */
  dbPath: z.string(),
  /** Postgres instead of SQLite (`postgres://user:pass@host/db`): what replicas share. */
  databaseUrl: z.string().url().optional(),
  /** The server secret (tokens' HMAC key); default: `server.secret` beside the database. */
  secretPath: z.string().optional(),
  /**
   * Exposed ports are served on their own origins, `{port}-{sandboxId}.{sandboxDomain}` (any port
   * of this server). `localhost` works on one box: browsers and curl resolve `*.localhost` to
   * loopback. Set a wildcard DNS name for a server other machines reach.
   */
  sandboxDomain: z
    .string()
    .regex(/^[a-z0-9.-]+$/i)
    .default('localhost'),
  /** Also serve exposed ports at `/s/{id}/{port}/` on the API's origin (all sandboxes then share one browser origin). */
  portsPathRoute: z.boolean().default(false),
  /** Largest JSON body (exec requests carry stdin). */
  maxJsonBodyBytes: z
    .number()
    .int()
    .positive()
    .default(24 * 1024 * 1024),
  /** Largest file upload through PUT /files. */
  maxUploadBytes: z
    .number()
    .int()
    .positive()
    .default(1024 * 1024 * 1024),
  maxSandboxes: z.number().int().positive().default(150),
  /** Template builds running at once; more are queued. */
  maxConcurrentBuilds: z.number().int().positive().default(2),
  /** Largest build context tarball (PUT /v1/builds/{id}/context). */
  maxContextBytes: z
    .number()
    .int()
    .positive()
    .default(1024 * 1024 * 1024),
  reaperIntervalMs: z.number().int().positive().default(1000),
  /** A running, non-persistent sandbox with no request for this long is hibernated (or killed); 0 turns it off. */
  idleTimeoutSeconds: z.number().int().min(0).default(600),
  idleAction: z.enum(['hibernate', 'kill']).default('hibernate'),
  /**
   * A running sandbox with no request (nor proxied connection) for this long is frozen if its agent
   * finds it quiet: it then uses no CPU until the next call, which thaws it; 0 turns it off.
   */
  freezeAfterSeconds: z.number().min(0).default(10),
  /** Events older than this are deleted. */
  eventRetentionHours: z
    .number()
    .positive()
    .default(7 * 24),
  /** Hosts join with this (`forkbox server`); unset: no host can join. */
  joinToken: z.string().min(16).optional(),
  /**
   * A sandbox still `starting` after this long was being started by a replica that went away
   * (fleet): it is errored and stopped (a wake: hibernated again). Longer than any start.
   */
  startingTimeoutSeconds: z.number().positive().default(300),
  /** A call refused because its sandbox was moving (it never started) is sent again for this long. */
  movingRetrySeconds: z.number().positive().default(60),
  /** A host with no heartbeat for this long is unreachable: it takes no new sandboxes. */
  hostGraceSeconds: z.number().positive().default(10),
  /**
   * Origins whose pages may call the API from a browser (CORS), each exactly as the browser sends
   * it (`https://app.example.com`, `http://127.0.0.1:5173`); empty (the default): none may.
   */
  corsOrigins: z
    .array(z.string().regex(/^https?:\/\/[^/\s]+$/, 'a CORS origin is scheme://host[:port], with no path'))
    .default([]),
  /**
   * Each key's calls per route class (`create`: sandboxes, forks, snapshots, template builds;
   * `data`: every other call), as `perSecond/burst` or `off`; a key's own limits (set by the admin)
   * replace these. Counted in the store: the same across replicas.
   */
  rateLimitCreate: RateSetting.default('10/50'),
  rateLimitData: RateSetting.default('1000/2000'),
  /**
   * How long an E2B signed file URL made without `signature_expiration` (the E2B clients' default)
   * keeps working: at most this long after the envd token it was signed with was handed out, and
   * at least half of it (e2b/envd-token.ts). `off`: forever, as on E2B (an operator's choice).
   */
  e2bSignedUrlMaxSeconds: z
    .union([z.literal('off'), z.number().int().min(60).max(MAX_SIGNED_URL_SECONDS)])
    .default(3600),
  /** Audit entries older than this are deleted. */
  auditRetentionDays: z.number().positive().default(90),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
})
export type ServerConfig = z.infer<typeof ServerConfig>
export type ServerConfigInput = z.input<typeof ServerConfig>
