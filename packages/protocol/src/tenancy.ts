// What a platform serving many tenants keeps per API key: quotas, rate limits, scopes, expiry and
// rotation (the key's own settings), what it used (metering) and what was done with it (audit).
import { z } from 'zod'

/** Quotas a key may be given; unset: only the server's own limits apply. */
export const QUOTA_NAMES = [
  'sandboxes',
  'vcpus',
  'memoryMB',
  'diskMB',
  'snapshotBytes',
  'templateBytes',
  'concurrentBuilds',
] as const
export type QuotaName = (typeof QUOTA_NAMES)[number]

const count = z.number().int().min(0)
export const KeyQuotas = z
  .object({
    /** Live sandboxes (starting or running; hibernated ones hold none of this). */
    sandboxes: count.optional(),
    /** vCPUs of its live sandboxes together. */
    vcpus: z.number().min(0).optional(),
    /** Memory of its live sandboxes together. */
    memoryMB: count.optional(),
    /** Disk (`diskMB`) of its live and hibernated sandboxes together. */
    diskMB: count.optional(),
    /** Bytes of its snapshots (hibernated sandboxes' included). */
    snapshotBytes: count.optional(),
    /** Bytes of its templates' ready builds. */
    templateBytes: count.optional(),
    /** Template builds queued or running at once. */
    concurrentBuilds: count.optional(),
  })
  .strict()
export type KeyQuotas = z.infer<typeof KeyQuotas>

/** Route classes counted apart: `create` (sandboxes, forks, snapshots, builds), `data` (every other call). */
export const RATE_CLASSES = ['create', 'data'] as const
export type RateClass = (typeof RATE_CLASSES)[number]

/** A token bucket: `perSecond` calls on average, `burst` of them at once. */
export const RateLimit = z
  .object({ perSecond: z.number().positive().max(100_000), burst: z.number().int().min(1).max(1_000_000) })
  .strict()
export type RateLimit = z.infer<typeof RateLimit>
export const KeyRateLimits = z.object({ create: RateLimit.optional(), data: RateLimit.optional() }).strict()
export type KeyRateLimits = z.infer<typeof KeyRateLimits>

/** What a key may do; unset: everything a key may. */
export const KeyScopes = z
  .object({
    /** Only reads: listing and getting sandboxes, templates, snapshots, files, metrics, events. */
    readOnly: z.boolean().optional(),
    /** Sandboxes with no network: no internet, no egress rules, no exposed ports. */
    noNetwork: z.boolean().optional(),
    /** Sandboxes (and snapshots) only from these templates. */
    templates: z.array(z.string().min(1).max(128)).min(1).max(100).optional(),
  })
  .strict()
export type KeyScopes = z.infer<typeof KeyScopes>

export const ApiKeyInfo = z.object({
  id: z.string(),
  name: z.string(),
  prefix: z.string(),
  createdAt: z.string(),
  revokedAt: z.string().nullable(),
  admin: z.boolean(),
  expiresAt: z.string().nullable(),
  /** While a rotation's old secret is still accepted: until when. */
  previousSecretExpiresAt: z.string().nullable(),
  scopes: KeyScopes,
  quotas: KeyQuotas,
  rateLimits: KeyRateLimits,
})
export type ApiKeyInfo = z.infer<typeof ApiKeyInfo>

/** How long a key lives from its creation: at most ten years. */
const MAX_KEY_SECONDS = 10 * 365 * 24 * 3600
export const CreateKeyRequest = z
  .object({
    name: z.string().min(1).max(128),
    /** `e2b` issues the key as `e2b_<hex>`, for the E2B clients (docs/e2b.md). */
    format: z.enum(['forkbox', 'e2b']).default('forkbox'),
    scopes: KeyScopes.optional(),
    quotas: KeyQuotas.optional(),
    rateLimits: KeyRateLimits.optional(),
    /** The key is refused after this many seconds. */
    ttlSeconds: z.number().int().min(1).max(MAX_KEY_SECONDS).optional(),
  })
  .strict()
export const CreatedKey = ApiKeyInfo.extend({ key: z.string() })

/** A change of a key (admin): what is given replaces what was; `null` clears it. */
export const UpdateKeyRequest = z
  .object({
    name: z.string().min(1).max(128).optional(),
    scopes: KeyScopes.optional(),
    quotas: KeyQuotas.optional(),
    rateLimits: KeyRateLimits.optional(),
    expiresAt: z.string().datetime({ offset: true }).nullable().optional(),
  })
  .strict()
export type UpdateKeyRequest = z.infer<typeof UpdateKeyRequest>

export const RotateKeyRequest = z
  .object({
    /** How long the old secret is still accepted (default one hour; 0: not at all). */
    graceSeconds: z
      .number()
      .int()
      .min(0)
      .max(7 * 24 * 3600)
      .default(3600),
  })
  .strict()

export const UsageGranularity = z.enum(['hour', 'day', 'total'])
export const UsageQuery = z.object({
  from: z.string().datetime({ offset: true }),
  to: z.string().datetime({ offset: true }).optional(),
  granularity: UsageGranularity.default('day'),
  /** Admin only: this key's usage (default: the caller's; `all`: every key's, summed). */
  key: z.string().max(64).optional(),
})

/** What was used in one stretch of time. */
export const UsageFigures = z.object({
  /** vCPUs held × seconds live (starting or running). */
  vcpuSeconds: z.number(),
  /** GiB of memory held × seconds live. */
  memoryGiBSeconds: z.number(),
  /** Bytes its sandboxes sent out. */
  egressBytes: z.number(),
  /** GiB of snapshots kept × seconds. */
  snapshotGiBSeconds: z.number(),
  /** Sandbox-seconds live. */
  sandboxSeconds: z.number(),
})
export type UsageFigures = z.infer<typeof UsageFigures>
export const UsageReport = z.object({
  key: z.string(),
  from: z.string(),
  to: z.string(),
  granularity: UsageGranularity,
  buckets: z.array(UsageFigures.extend({ start: z.string(), end: z.string() })),
  total: UsageFigures,
})
export type UsageReport = z.infer<typeof UsageReport>

export const AuditEntry = z.object({
  id: z.number(),
  at: z.string(),
  keyId: z.string().nullable(),
  action: z.string(),
  target: z.string().nullable(),
  status: z.number(),
  ip: z.string().nullable(),
  userAgent: z.string().nullable(),
  requestId: z.string().nullable(),
  detail: z.record(z.string(), z.unknown()).nullable(),
})
export type AuditEntry = z.infer<typeof AuditEntry>
export const AuditQuery = z.object({
  from: z.string().datetime({ offset: true }).optional(),
  to: z.string().datetime({ offset: true }).optional(),
  key: z.string().max(64).optional(),
  action: z.string().max(64).optional(),
  /** Entries after this id (the previous page's `next`). */
  after: z.coerce.number().int().min(0).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
})
export const AuditPage = z.object({ entries: z.array(AuditEntry), next: z.number().nullable() })
