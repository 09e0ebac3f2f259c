// Loads @forkbox/host for `forkbox up`, the one place the CLI reaches past the SDK.
import type {
  startAgentHost as realStartAgentHost,
  startHost as realStartHost,
  startServerHost as realStartServerHost,
} from '@forkbox/host'
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
  /** HTTPS: a PEM certificate chain and its key (both or neither). */
  tlsCertFile?: string
  tlsKeyFile?: string
  onTemplateProgress?: (progress: TemplateProgress) => void
}

export interface RunningHost {
  url: string
  /** Set only when this start created the first (admin) key. */
  bootstrapKey: string | null
  close(): Promise<void>
}

export interface RunningAgentHost {
  url: string
  hostId: string
  close(): Promise<void>
}

/** The part of @forkbox/host `up`, `server` and `agent` use; declared here so the CLI type-checks without the host. */
export interface HostModule {
  startHost(options?: StartHostOptions): Promise<RunningHost>
  startServerHost?(options?: Omit<StartHostOptions, 'onTemplateProgress'>): Promise<RunningHost>
  startAgentHost?(options?: StartHostOptions): Promise<RunningAgentHost>
}

// Compile-time only: fails when the real startHost stops fitting the shape `up` relies on.
type Fits<T extends true> = T
export type HostModuleFits = Fits<typeof realStartHost extends HostModule['startHost'] ? true : false>
export type ServerModuleFits = Fits<
  typeof realStartServerHost extends NonNullable<HostModule['startServerHost']> ? true : false
>
export type AgentModuleFits = Fits<
  typeof realStartAgentHost extends NonNullable<HostModule['startAgentHost']> ? true : false
>

// A variable specifier keeps bundlers and loaders from pulling the host in for other commands.
const HOST_MODULE = '@forkbox/host'

export async function importHost(): Promise<HostModule> {
  let mod: unknown
  try {
    mod = await import(HOST_MODULE)
  } catch (err) {
    // the installed CLI package is a client: the platform itself runs from a checkout
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ERR_MODULE_NOT_FOUND' && (err as Error).message.includes(HOST_MODULE))
      throw new CliError(
        'HOST_UNAVAILABLE',
        'this command runs the forkbox platform itself, which this installed CLI does not hold: run it from a forkbox checkout (`npm run up` there, see its README); the installed CLI talks to a running server (FORKBOX_URL, FORKBOX_API_KEY)',
      )
    throw new CliError('HOST_UNAVAILABLE', `cannot load ${HOST_MODULE}: ${(err as Error).message}`)
  }
  const m = (mod ?? {}) as Partial<HostModule>
  const { startHost, startServerHost, startAgentHost } = m
  if (typeof startHost !== 'function' || typeof startServerHost !== 'function' || typeof startAgentHost !== 'function')
    throw new CliError('HOST_UNAVAILABLE', `${HOST_MODULE} lacks startHost, startServerHost or startAgentHost`)
  return { startHost, startServerHost, startAgentHost }
}
