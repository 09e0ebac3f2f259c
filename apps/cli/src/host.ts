// Loads @forkbox/host for `forkbox up`, the one place the CLI reaches past the SDK.
import type { startHost as realStartHost } from '@forkbox/host'
import { CliError } from './cli-error.ts'

export interface TemplateProgress {
  template: string
  phase: string
  /** 0..1 when known */
  fraction?: number
  message?: string
}

export interface StartHostOptions {
  port?: number
  host?: string
  onTemplateProgress?: (progress: TemplateProgress) => void
}

export interface RunningHost {
  url: string
  /** Set only when this start created the first (admin) key. */
  bootstrapKey: string | null
  close(): Promise<void>
}

/** The part of @forkbox/host `up` uses; declared here so the CLI type-checks without the host. */
export interface HostModule {
  startHost(options?: StartHostOptions): Promise<RunningHost>
}

// Compile-time only: fails when the real startHost stops fitting the shape `up` relies on.
type Fits<T extends true> = T
export type HostModuleFits = Fits<typeof realStartHost extends HostModule['startHost'] ? true : false>

// A variable specifier keeps bundlers and loaders from pulling the host in for other commands.
const HOST_MODULE = '@forkbox/host'

export async function importHost(): Promise<HostModule> {
  let mod: unknown
  try {
    mod = await import(HOST_MODULE)
  } catch (err) {
    throw new CliError('HOST_UNAVAILABLE', `cannot load ${HOST_MODULE}: ${(err as Error).message}`)
  }
  const startHost = (mod as Partial<HostModule> | null)?.startHost
  if (typeof startHost !== 'function') throw new CliError('HOST_UNAVAILABLE', `${HOST_MODULE} has no startHost()`)
  return { startHost }
}
