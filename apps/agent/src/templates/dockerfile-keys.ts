// Layer cache keys: each step's key chains its parent's, so a change reaches that step and every later one.
import { createHash } from 'node:crypto'
import type { BuildPlan, ImageSource, Step } from './dockerfile-plan.ts'

export interface StepKeyOptions {
  /** The content digest of each image a stage or `COPY --from` names, by ref; without it the ref itself is keyed. */
  imageDigests?: ReadonlyMap<string, string>
  /** The current version of each forkbox template named by `forkbox:<name>`. */
  templateVersions?: ReadonlyMap<string, string>
}

function sha256(parts: unknown[]): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex')
}

/** The step's content as it affects its result: everything but where it sits in the file. */
function normalized(step: Step): Omit<Step, 'line'> {
  const { line: _line, ...rest } = step
  return rest
}

/**
 * One sha256 key per step, `keys[stage][step]`. `contextHashes` maps each context source of a
 * COPY/ADD (as written in the plan's `sources`) to a hash of its content; a missing one throws,
 * since keying a copy without its content would reuse a stale layer.
 */
export function stepKeys(
  plan: BuildPlan,
  contextHashes: ReadonlyMap<string, string>,
  options: StepKeyOptions = {},
): string[][] {
  return buildKeys(plan, contextHashes, options).steps
}

/** `stepKeys`, plus each stage's base key (what its first step's key chains). */
export function buildKeys(
  plan: BuildPlan,
  contextHashes: ReadonlyMap<string, string>,
  options: StepKeyOptions = {},
): { bases: string[]; steps: string[][] } {
  const keys: string[][] = []
  const bases: string[] = []
  /** A stage's result: the key of its last step, or of its base when it has no steps. */
  const stageKeys: string[] = []
  const sourceKey = (src: ImageSource): unknown => {
    switch (src.kind) {
      case 'stage': {
        const k = stageKeys[src.index]
        if (k === undefined) throw new Error(`stage ${src.index} is used before it is built`)
        return ['stage', k]
      }
      case 'image':
        return ['image', options.imageDigests?.get(src.ref) ?? src.ref]
      case 'template':
        return ['template', src.name, options.templateVersions?.get(src.name) ?? null]
      case 'scratch':
        return ['scratch']
    }
  }
  for (const stage of plan.stages) {
    let parent = sha256(['base', sourceKey(stage.from)])
    bases.push(parent)
    const own: string[] = []
    for (const step of stage.steps) {
      let inputs: unknown = null
      if (step.op === 'copy') {
        inputs = step.from
          ? sourceKey(step.from)
          : step.sources.map((s) => {
              const h = contextHashes.get(s)
              if (h === undefined) throw new Error(`no content hash for ${s} (line ${step.line})`)
              return [s, h]
            })
      }
      parent = sha256([parent, normalized(step), inputs])
      own.push(parent)
    }
    keys.push(own)
    stageKeys.push(parent)
  }
  return { bases, steps: keys }
}
