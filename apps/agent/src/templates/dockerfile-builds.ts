// The Dockerfile builds this agent runs (users' templates and built-in ones written as a
// Dockerfile), each through the one TemplateBuilder and tracked: closing aborts them and waits
// until each has taken its mounts down.
import type { BuildLogSink } from './build-log.ts'
import {
  type BuilderDeps,
  type TemplateBuildResult as BuiltRootfs,
  TemplateBuilder,
  type TemplateBuildInput,
} from './builder.ts'

export class DockerfileBuilds {
  private readonly builder: TemplateBuilder
  /** Builds running now. */
  private readonly running = new Set<{ abort: AbortController; done: Promise<unknown> }>()

  constructor(opts: BuilderDeps) {
    this.builder = new TemplateBuilder(opts)
  }

  /**
   * Builds a Dockerfile into a template rootfs: every step in a build sandbox, each step's result a
   * cached layer (a rebuild starts at the first changed step). `onLog` gets the steps as they run.
   */
  async buildDockerfile(input: TemplateBuildInput, onLog?: BuildLogSink, signal?: AbortSignal): Promise<BuiltRootfs> {
    const abort = new AbortController()
    const onAbort = () => abort.abort()
    if (signal?.aborted) abort.abort()
    signal?.addEventListener('abort', onAbort)
    const done = this.builder.build(input, onLog, abort.signal)
    const entry = { abort, done: done.catch(() => {}) }
    this.running.add(entry)
    try {
      return await done
    } finally {
      this.running.delete(entry)
      signal?.removeEventListener('abort', onAbort)
    }
  }

  /** Whether a build runs now (its layers are not the prune's to judge). */
  get busy(): boolean {
    return this.running.size > 0
  }

  /** Aborts every build and waits until each has ended. */
  async close(): Promise<void> {
    for (const b of this.running) b.abort.abort()
    await Promise.all([...this.running].map((b) => b.done))
  }
}
