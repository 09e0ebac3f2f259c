// Template definitions (templates/NAME/template.json) and their content address.
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { ResolvedResources } from '@forkbox/protocol'
import { z } from 'zod'

export const TemplateDefinition = z
  .object({
    name: z.string().regex(/^[a-z0-9][a-z0-9-]*$/),
    description: z.string(),
    suite: z.string().default('bookworm'),
    /** Debian packages debootstrap installs; empty when the rootfs comes from `image`. */
    packages: z.array(z.string().regex(/^[a-z0-9][a-z0-9+.-]*$/)).default([]),
    /** An OCI/Docker image reference (`registry/repo:tag[@sha256:…]`) to take the rootfs from instead. */
    image: z.string().max(512).optional(),
    user: z.string().default('user'),
    /**
     * Code kernels (runCode) of this template run `preload` at start; the bake captures one warm.
     * `zygote`: new Python contexts are forked warm from a pristine kernel, the zygote (~200 ms
     * instead of the preload's seconds), which holds ~55–80 MiB of its own under gVisor. `lazy`:
     * the first context a user creates starts cold and brings the zygote, later ones are forked;
     * `baked`: the zygote is in the template's snapshot, so every sandbox pays for it and even the
     * first context is fast; `off`: every context starts cold.
     */
    kernel: z
      .object({
        preload: z
          .string()
          .max(64 * 1024)
          .default(''),
        zygote: z.enum(['lazy', 'baked', 'off']).default('lazy'),
      })
      .optional(),
    resources: z.object({ defaults: ResolvedResources, maxima: ResolvedResources }),
    /** The image's environment: every sandbox's, under what a create adds. */
    env: z.record(z.string(), z.string()).default({}),
    /** The image's WORKDIR: where commands start unless told otherwise. */
    workdir: z.string().startsWith('/').optional(),
    /** Started at bake time (as `user`, in `workdir`): it runs in every sandbox restored from the snapshot. */
    startCmd: z.array(z.string()).min(1).optional(),
    /** Must exit 0 (retried) before the snapshot is baked; with a start command and no check, its exposed ports must accept. */
    readyCmd: z.array(z.string()).min(1).optional(),
    /** Ports sandboxes expose unless a create says otherwise (EXPOSE). */
    exposedPorts: z.array(z.number().int().min(1).max(65535)).default([]),
    /** A user's image: its /home, /tmp and /work show in sandboxes (no tmpfs over them). */
    imageDirs: z.boolean().default(false),
    /**
     * Processes get RLIMIT_AS = the sandbox's memory (Python then raises MemoryError instead of
     * being OOM-killed). Off for browsers, V8, the JVM and Go, which reserve far more address space
     * than they use; the memory cgroup bounds them either way.
     */
    limitAddressSpace: z.boolean().default(true),
    /** A built-in template written as a Dockerfile (this file, in its dir, which is also its build context). */
    dockerfile: z
      .string()
      .regex(/^[A-Za-z0-9._-]+$/)
      .optional(),
    /** The dir template.json was read from (set by the loader). */
    dir: z.string().optional(),
  })
  .refine((d) => [d.image, d.dockerfile, d.packages.length > 0 || undefined].filter(Boolean).length <= 1, {
    message: 'a template takes its rootfs from an image, a Dockerfile or packages: one of them',
  })
export type TemplateDefinition = z.infer<typeof TemplateDefinition>
/** A template's code kernel settings (`kernel` in template.json). */
export type KernelSettings = NonNullable<TemplateDefinition['kernel']>

/** Bumped when the build recipe itself changes, so every template re-builds. */
const RECIPE_VERSION = 5

export function loadDefinitions(dir: string): Map<string, TemplateDefinition> {
  const out = new Map<string, TemplateDefinition>()
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue
    const raw = JSON.parse(readFileSync(join(dir, entry.name, 'template.json'), 'utf8'))
    const def = TemplateDefinition.parse({ ...raw, dir: join(dir, entry.name) })
    out.set(def.name, def)
  }
  return out
}

/**
 * What the rootfs is built from; limits are left out since they don't change the image. An image
 * template's address holds the manifest digest its reference resolved to: a new push re-bakes.
 */
export function templateHash(def: TemplateDefinition, imageDigest?: string): string {
  const input = JSON.stringify({
    v: RECIPE_VERSION,
    suite: def.suite,
    packages: [...def.packages].sort(),
    user: def.user,
    ...(def.image ? { image: def.image, digest: imageDigest } : {}),
  })
  return createHash('sha256').update(input).digest('hex').slice(0, 16)
}
