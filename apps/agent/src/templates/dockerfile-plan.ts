// The typed build plan a Dockerfile becomes: stages of filesystem steps plus the image config they leave.
// Kept in the agent: the server passes the Dockerfile text through and gets problems back as an AppError.

/** Where a stage's (or a `COPY --from`'s) root filesystem comes from. */
export type ImageSource =
  | { kind: 'image'; ref: string }
  | { kind: 'template'; name: string }
  | { kind: 'stage'; index: number }
  | { kind: 'scratch' }

interface StepBase {
  /** 1-based line of the instruction in the Dockerfile. */
  line: number
  /** Build args (ARG values) this step's result depends on, by name. */
  buildArgs: Record<string, string>
}

export interface RunStep extends StepBase {
  op: 'run'
  argv: string[]
  /** ENV plus in-scope ARG values, as Docker gives them to RUN (ENV wins on a clash). */
  env: Record<string, string>
  workdir: string | undefined
  user: string | undefined
}

export interface CopyStep extends StepBase {
  op: 'copy'
  /** ADD rather than COPY (only differs by `extract`). */
  add: boolean
  /** Paths or patterns relative to the context root (or the `from` root), normalized, no `..`. */
  sources: string[]
  /** Absolute destination; ends with `/` when Docker treats it as a directory. */
  dest: string
  /** Undefined: the uploaded build context. */
  from: ImageSource | undefined
  chown: string | undefined
  chmod: string | undefined
  /** ADD of a local tar archive: unpack it at `dest` instead of copying the file. */
  extract: boolean
}

export interface WorkdirStep extends StepBase {
  op: 'workdir'
  /** Absolute; created if missing, as Docker does. */
  path: string
}

export type Step = RunStep | CopyStep | WorkdirStep

/** What a stage sets on the image; undefined fields keep the base image's value. */
export interface ImageConfig {
  env: Record<string, string>
  workdir: string | undefined
  user: string | undefined
  exposedPorts: number[]
  cmd: string[] | undefined
  entrypoint: string[] | undefined
  /** Null: `HEALTHCHECK NONE` turned the base's check off. */
  healthcheck: string[] | null | undefined
  labels: Record<string, string>
}

export interface Stage {
  index: number
  /** Lower-cased, as Docker compares stage names. */
  name: string | undefined
  line: number
  from: ImageSource
  steps: Step[]
  config: ImageConfig
}

export interface BuildPlan {
  stages: Stage[]
  /** The stage the template is made from: the last one. */
  target: number
  /** ENTRYPOINT and CMD of the target combined as Docker runs them; undefined keeps the image's. */
  startCmd: string[] | undefined
  /** HEALTHCHECK CMD of the target; the ready check at bake time. */
  readyCmd: string[] | null | undefined
  exposedPorts: number[]
  labels: Record<string, string>
}

/** One reason the Dockerfile cannot be built, found before anything runs. */
export interface DockerfileProblem {
  line: number
  message: string
}
