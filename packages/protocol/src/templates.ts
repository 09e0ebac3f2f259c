// Templates users build and the built-in ones, as the HTTP API shows them.
import { z } from 'zod'
import { ResolvedResources, Resources } from './schemas.ts'

export const TemplateInfo = z.object({
  name: z.string(),
  description: z.string(),
  defaults: ResolvedResources,
  maxima: ResolvedResources,
  ready: z.boolean(),
  /** Ports a sandbox from it exposes unless its create says otherwise (the image's EXPOSE). */
  exposedPorts: z.array(z.number().int()).optional(),
})
export type TemplateInfo = z.infer<typeof TemplateInfo>

/** A template as GET /v1/templates lists it: a built-in (id and version null) or a user's. */
export const TemplateListing = TemplateInfo.extend({
  /** The user template's id; null for a built-in. */
  id: z.string().nullable(),
  /** The version `name` alone creates from; null for a built-in. */
  version: z.number().int().nullable(),
  public: z.boolean(),
})
export type TemplateListing = z.infer<typeof TemplateListing>

/** A template name users give: lowercase, digits and `-_.`, as E2B aliases are. */
export const TemplateName = z
  .string()
  .regex(
    /^[a-z0-9][a-z0-9._-]{0,62}$/,
    'a template name is 1-63 of a-z, 0-9, ".", "_", "-", starting with a letter or digit',
  )

export const TemplateBuildStatus = z.enum(['waiting', 'queued', 'building', 'ready', 'failed'])
export type TemplateBuildStatus = z.infer<typeof TemplateBuildStatus>

export const TemplateBuild = z.object({
  id: z.string(),
  templateId: z.string(),
  template: z.string(),
  /** Every build of a template gets the next version; `name@version` creates from that one once ready. */
  version: z.number().int(),
  /** waiting: for its context upload; queued: for a build slot. */
  status: TemplateBuildStatus,
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
  createdAt: z.string(),
  finishedAt: z.string().nullable(),
})
export type TemplateBuild = z.infer<typeof TemplateBuild>

export const BuildLogEntry = z.object({
  /** 0-based position in the build's log: resume from `seq + 1`. */
  seq: z.number().int(),
  at: z.string(),
  /** The Dockerfile step, when the line is a step's. */
  step: z.number().int().nullable(),
  stream: z.enum(['system', 'stdout', 'stderr']),
  message: z.string(),
})
export type BuildLogEntry = z.infer<typeof BuildLogEntry>

export const UserTemplate = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string(),
  public: z.boolean(),
  /**
   * What `name` alone creates from: for the owner the newest ready version (null before the first
   * is ready), for every other key the published one.
   */
  version: z.number().int().nullable(),
  /** The version the admin published (the only one other keys get); null while private. */
  publishedVersion: z.number().int().nullable(),
  createdAt: z.string(),
  /** Newest first; only the owner and the admin see them (other keys get none). */
  builds: z.array(TemplateBuild),
})
export type UserTemplate = z.infer<typeof UserTemplate>

export const CreateTemplateRequest = z
  .object({
    name: TemplateName,
    description: z.string().max(1000).optional(),
    /** An OCI/Docker image reference to take the rootfs from as it is. */
    image: z.string().min(1).max(512).optional(),
    /** A Dockerfile's text; its COPY/ADD sources come from the context uploaded next. */
    dockerfile: z
      .string()
      .min(1)
      .max(1024 * 1024)
      .optional(),
    buildArgs: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string().max(64 * 1024)).optional(),
    /** Default resources of sandboxes from it (within the host's template maxima). */
    resources: Resources.optional(),
    /** A context tarball follows (PUT /v1/builds/{id}/context); the build waits for it. */
    context: z.boolean().optional(),
    /**
     * The image comes as an archive uploaded next to PUT /v1/builds/{id}/context (`docker save`
     * output or an OCI layout tarball); the build waits for it.
     */
    archive: z.boolean().optional(),
    /** Started at bake time and running in every sandbox (instead of the Dockerfile's CMD/ENTRYPOINT); a shell line. */
    startCmd: z
      .string()
      .min(1)
      .max(16 * 1024)
      .optional(),
    /** Must exit 0 before the snapshot is baked (instead of HEALTHCHECK, or of waiting for the exposed ports); a shell line. */
    readyCmd: z
      .string()
      .min(1)
      .max(16 * 1024)
      .optional(),
    /** A login for the image's registry: kept (sealed) as this key's, as PUT /v1/registries/{registry} does. */
    registryAuth: z.object({ username: z.string().min(1).max(256), password: z.string().min(1).max(4096) }).optional(),
  })
  .refine((r) => [r.image !== undefined, r.dockerfile !== undefined, r.archive === true].filter(Boolean).length === 1, {
    message: 'give exactly one of image, dockerfile or archive',
  })
  .refine((r) => !(r.context && !r.dockerfile), { message: 'a context goes with a dockerfile' })
export type CreateTemplateRequest = z.infer<typeof CreateTemplateRequest>
