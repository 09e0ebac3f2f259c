// What a Dockerfile build made, as a template takes it: the image config its sandboxes start with
// (env, workdir, user, start and ready commands, exposed ports) and the definition made of it.
import type { BuiltImage, ResolvedResources } from '@forkbox/protocol'
import type { TemplateBuildResult as BuiltRootfs } from './builder.ts'
import { TemplateDefinition } from './definition.ts'
import { userNameOf } from './oci.ts'

/** What a build made, as the image config its sandboxes take. */
export function builtImage(built: BuiltRootfs): BuiltImage {
  return {
    key: built.key,
    env: built.config.env,
    user: built.config.user,
    workdir: built.config.workdir,
    startCmd: built.startCmd,
    readyCmd: built.readyCmd ?? undefined,
    exposedPorts: built.exposedPorts,
  }
}

/**
 * The baker's definition of a template a Dockerfile built: its image's env, workdir, start and
 * ready commands and exposed ports; its default user is the image's USER when that is a name.
 */
export function builtDefinition(
  name: string,
  description: string,
  image: BuiltImage,
  resources: { defaults: ResolvedResources; maxima: ResolvedResources },
): TemplateDefinition {
  return TemplateDefinition.parse({ name, description, resources, ...imageConfigFields(image, 'user') })
}

/**
 * A definition's fields from what a build made: its env, workdir, start and ready commands and
 * exposed ports; its default user is the image's USER when that is a name, else `fallbackUser`.
 */
export function imageConfigFields(image: Omit<BuiltImage, 'key'>, fallbackUser: string) {
  return {
    user: userNameOf(image.user) ?? fallbackUser,
    env: image.env,
    workdir: image.workdir,
    startCmd: image.startCmd,
    readyCmd: image.readyCmd,
    exposedPorts: image.exposedPorts,
    imageDirs: true,
    // as on E2B: a user's image may run a browser, a JVM or Go, whose reservations RLIMIT_AS breaks
    limitAddressSpace: false,
  }
}
