// The control plane's settings, validated once; the host passes them in.
import { z } from 'zod'

export const ServerConfig = z.object({
  dbPath: z.string(),
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
  reaperIntervalMs: z.number().int().positive().default(1000),
  /** A running, non-persistent sandbox with no request for this long is hibernated (or killed); 0 turns it off. */
  idleTimeoutSeconds: z.number().int().min(0).default(600),
  idleAction: z.enum(['hibernate', 'kill']).default('hibernate'),
  /** Events older than this are deleted. */
  eventRetentionHours: z
    .number()
    .positive()
    .default(7 * 24),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
})
export type ServerConfig = z.infer<typeof ServerConfig>
export type ServerConfigInput = z.input<typeof ServerConfig>
