// Image templates' images: each reference pinned to the digest it names when first ensured, the
// image pulled and its config taken into the definition, and unpacked into the template's rootfs.
// A user's build pulls with its own registry credentials and byte bound.
import type { TemplateProgress } from '@forkbox/protocol'
import { quotaBound, tighter } from './build-disk.ts'
import type { TemplateDefinition } from './definition.ts'
import {
  type OciOptions,
  pullImage,
  type RegistryAuth,
  readImageConfig,
  resolveImageDigest,
  unpackImage,
  userNameOf,
} from './oci.ts'

/** What a user's build shows for its pulls: its registry credentials (access must be shown) and its byte bound. */
export interface BuildAccess {
  auth: RegistryAuth
  maxBytes?: number
}

export interface TemplateImagesOptions {
  /** Where and how images are pulled (the pull cache, the pull network, the host's image cap). */
  oci: OciOptions
}

export class TemplateImages {
  /** By template: the manifest digest its reference resolved to when first ensured. */
  private readonly digests = new Map<string, string>()
  /** By template whose definition took its image's config (env, workdir, user): its pulled layout. */
  private readonly layouts = new Map<string, string>()
  /** While a user's build runs: what its pulls show. */
  private readonly access = new Map<string, BuildAccess>()

  constructor(private readonly opts: TemplateImagesOptions) {}

  /** The digest a template's reference was pinned to (image templates only, once resolved). */
  digest(name: string): string | undefined {
    return this.digests.get(name)
  }

  /** The pulled layout of a template whose definition took its image's config. */
  layout(name: string): string | undefined {
    return this.layouts.get(name)
  }

  /** A definition registered anew: its image's config is taken into it again. */
  forgetConfig(name: string): void {
    this.layouts.delete(name)
  }

  /** A template removed: its pin and its layout go. */
  forget(name: string): void {
    this.digests.delete(name)
    this.layouts.delete(name)
  }

  /** Runs `fn` with `name`'s pulls made as a user's build (its credentials, its bound). */
  async withAccess<T>(name: string, access: BuildAccess, fn: () => Promise<T>): Promise<T> {
    this.access.set(name, access)
    try {
      return await fn()
    } finally {
      this.access.delete(name)
    }
  }

  /** A user's build also proves it may read its image: the pull cache is shared by every key. */
  private ociOptions(name: string): OciOptions {
    const { oci } = this.opts
    const access = this.access.get(name)
    return {
      ...oci,
      ...(access ? { auth: access.auth, verifyAccess: true } : {}),
      bound: tighter(oci.bound, quotaBound(access?.maxBytes)),
    }
  }

  /** Pins an image template to the digest its reference names now (the rootfs and snapshot are keyed by it). */
  async resolve(def: TemplateDefinition, onProgress?: (p: TemplateProgress) => void): Promise<void> {
    if (!def.image || this.digests.has(def.name)) return
    onProgress?.({ template: def.name, phase: 'resolve', fraction: 0, message: def.image })
    this.digests.set(def.name, await resolveImageDigest(def.image, this.ociOptions(def.name)))
  }

  /**
   * An image template's definition with its image's config under it (Docker's env, working dir and
   * user; what the definition sets wins) and the layout it was read from, the image pulled into the
   * cache if it was not there; null when the definition took its config already (or has no image).
   * The caller keeps both at once (`tookConfig`).
   */
  async configured(
    def: TemplateDefinition,
    onProgress?: (p: TemplateProgress) => void,
  ): Promise<{ def: TemplateDefinition; layout: string } | null> {
    if (!def.image || this.layouts.has(def.name)) return null
    const digest = this.digests.get(def.name)
    if (!digest) throw new Error(`${def.name}: image digest not resolved`)
    onProgress?.({ template: def.name, phase: 'pull', fraction: 0, message: `${def.image} ${digest}` })
    const { layout } = await pullImage(def.image, digest, this.ociOptions(def.name))
    const image = readImageConfig(layout)
    const configured: TemplateDefinition = {
      ...def,
      env: { ...image.env, ...def.env },
      workdir: def.workdir ?? image.workdir,
      user: userNameOf(image.user) ?? def.user,
    }
    return { def: configured, layout }
  }

  /** A definition took its image's config from `layout`. */
  tookConfig(name: string, layout: string): void {
    this.layouts.set(name, layout)
  }

  /** Unpacks a template's pulled image into its rootfs. */
  async unpack(
    def: TemplateDefinition,
    layout: string,
    rootfs: string,
    onProgress?: (p: TemplateProgress) => void,
  ): Promise<void> {
    onProgress?.({ template: def.name, phase: 'unpack', fraction: 0, message: layout })
    await unpackImage(layout, rootfs, this.ociOptions(def.name))
    onProgress?.({ template: def.name, phase: 'done', fraction: 1, message: rootfs })
  }
}
