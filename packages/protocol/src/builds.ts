// What a template build reports while it runs, step by step: the agent emits these, the server streams them.
import { z } from 'zod'

/** A step begins: `cached` steps reuse a stored layer and run nothing. */
export const BuildStepStarted = z.object({
  type: z.literal('step'),
  /** 0-based over the whole build (every stage's steps, in build order). */
  step: z.number().int().nonnegative(),
  stage: z.number().int().nonnegative(),
  /** 1-based Dockerfile line of the instruction. */
  line: z.number().int().positive(),
  instruction: z.string(),
  cached: z.boolean(),
})

/** One line a running step printed (without its newline). */
export const BuildStepOutput = z.object({
  type: z.literal('output'),
  step: z.number().int().nonnegative(),
  stream: z.enum(['stdout', 'stderr']),
  line: z.string(),
})

/** A step ended; `exitCode` 0 is success (a cached step ends at once with 0). */
export const BuildStepFinished = z.object({
  type: z.literal('step_done'),
  step: z.number().int().nonnegative(),
  exitCode: z.number().int(),
  durationMs: z.number().nonnegative(),
})

/** A phase outside the steps (pulling a base image, assembling the rootfs). */
export const BuildPhase = z.object({
  type: z.literal('phase'),
  phase: z.string(),
  message: z.string(),
})

export const BuildLogEvent = z.discriminatedUnion('type', [
  BuildStepStarted,
  BuildStepOutput,
  BuildStepFinished,
  BuildPhase,
])
export type BuildLogEvent = z.infer<typeof BuildLogEvent>
