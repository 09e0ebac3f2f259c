// Templates users build through the API: their spec becomes a definition the baker knows, built
// and baked at once; the server keeps who owns them and registers them again after a restart.
import {
  AppError,
  type BuildLogLine,
  type TemplateBuildResult,
  type TemplateBuildSpec,
  type TemplateProgress,
} from '@forkbox/protocol'
import type { TemplateBaker } from './baker.ts'
import { TemplateDefinition } from './definition.ts'
import { formatImageReference, parseImageReference } from './image-ref.ts'

/** The baker's definition of a user's template (only image sources for now; Dockerfiles build through the builder). */
export function definitionOf(spec: TemplateBuildSpec): TemplateDefinition {
  if (spec.source.kind !== 'image')
    throw new AppError('NOT_IMPLEMENTED', 'templates from a Dockerfile are not built by this agent yet')
  // the reference is checked before anything is pulled: a bad one is the user's error
  parseImageReference(spec.source.image)
  return TemplateDefinition.parse({
    name: spec.name,
    description: spec.description,
    image: spec.source.image,
    resources: spec.resources,
  })
}

function progressLine(p: TemplateProgress): BuildLogLine {
  const pct = p.fraction === undefined ? '' : ` ${Math.round(p.fraction * 100)}%`
  return { stream: 'system', message: `${p.phase}${pct}${p.message ? `: ${p.message}` : ''}` }
}

export async function buildUserTemplate(
  baker: TemplateBaker,
  spec: TemplateBuildSpec,
  onLog: (line: BuildLogLine) => void,
  signal?: AbortSignal,
): Promise<TemplateBuildResult> {
  const def = definitionOf(spec)
  signal?.throwIfAborted()
  baker.register(def)
  try {
    let last = ''
    await baker.build(def.name, (p) => {
      const line = progressLine(p)
      // debootstrap and pulls report often: the log keeps each distinct line once
      if (line.message === last) return
      last = line.message
      onLog(line)
    })
  } catch (err) {
    await baker.remove(def.name)
    throw err
  }
  const digest = baker.digestOf(def.name)
  if (spec.source.kind === 'image' && digest) {
    const image = formatImageReference(parseImageReference(spec.source.image), digest)
    return { pinned: { ...spec, source: { kind: 'image', image } } }
  }
  return { pinned: spec }
}
