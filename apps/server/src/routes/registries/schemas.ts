import { z } from '@hono/zod-openapi'

/** A registry as image references name it: `host[:port]` (Docker Hub: `docker.io`). */
export const RegistryParam = z.object({
  registry: z
    .string()
    .regex(/^[A-Za-z0-9.-]+(?::\d{1,5})?$/)
    .max(255),
})

export const RegistryLogin = z.object({ registry: z.string(), username: z.string(), createdAt: z.string() })
