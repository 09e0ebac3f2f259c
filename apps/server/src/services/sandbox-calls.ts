// The one path of every call on a running sandbox: counted busy (neither reaped as idle nor
// frozen), woken first if hibernated, sent again when it was moving hosts, and reported as
// stopped if it stopped meanwhile. Files, watches, exposed ports, exec and code all go this way.
import type { Agent as HttpAgent } from 'node:http'
import { type AgentApi, type AgentSandbox, AppError } from '@forkbox/protocol'
import type { Authenticator } from '../http/auth.ts'
import type { SandboxStore } from '../store/sandboxes.ts'
import { tunnelAgent } from './port-tunnel.ts'
import type { SandboxService } from './sandboxes.ts'

export interface SandboxCallsOptions {
  sandboxes: SandboxService
  store: SandboxStore
  agent: AgentApi
  auth: Authenticator
  /** Sandboxes run on other machines: their ports are reached through their agents. */
  fleet?: boolean
  /** How long a call refused as its sandbox moved (it never started) is sent again. */
  movingRetryMs?: number
}

export class SandboxCalls {
  constructor(private readonly o: SandboxCallsOptions) {}

  /**
   * Runs `fn` against the running sandbox (woken first if hibernated); a sandbox that stopped
   * meanwhile is reported as such. A call refused because the sandbox was leaving its host
   * (SANDBOX_MOVING: it never started) goes again once the sandbox runs wherever it went.
   */
  async onSandbox<T>(owner: string, id: string, fn: (sandbox: AgentSandbox) => Promise<T>): Promise<T> {
    const release = this.o.sandboxes.hold(id)
    try {
      return await this.onAwake(owner, id, fn)
    } finally {
      release()
    }
  }

  private async onAwake<T>(owner: string, id: string, fn: (sandbox: AgentSandbox) => Promise<T>): Promise<T> {
    try {
      const deadline = Date.now() + (this.o.movingRetryMs ?? 60_000)
      for (;;) {
        await this.o.sandboxes.hibernation.awake(owner, id)
        try {
          // a handle per try: a sandbox that moved is looked for where it went
          return await fn(this.o.agent.sandbox(id))
        } catch (err) {
          if (!(err instanceof AppError && err.code === 'SANDBOX_MOVING') || Date.now() >= deadline) throw err
          await new Promise((r) => setTimeout(r, 100))
        }
      }
    } catch (err) {
      if (err instanceof AppError && (err.code === 'SANDBOX_NOT_RUNNING' || err.code === 'SANDBOX_ERRORED'))
        await this.o.sandboxes.running(owner, id)
      throw err
    }
  }

  /**
   * Where the control plane reaches port `port` of a sandbox, for a caller holding the owner's
   * key (`owner`) or the sandbox's access token. The port must be one the sandbox exposes. The
   * sandbox counts as busy (the idle reaper leaves it) until `done` is called: a proxied request,
   * or a WebSocket for as long as it is open.
   */
  async portTarget(
    credential: { owner: string } | { accessToken: string },
    id: string,
    port: number,
  ): Promise<{ host: string; port: number; done: () => void; agent?: HttpAgent }> {
    const s = await this.o.store.get(id)
    const allowed =
      s &&
      ('owner' in credential
        ? s.owner === credential.owner
        : await this.o.auth.verify('port', id, s.owner, credential.accessToken))
    if (!s || !allowed) throw new AppError('SANDBOX_NOT_FOUND', `no sandbox ${id}`)
    if (!s.network.ports.includes(port))
      throw new AppError('PORT_NOT_EXPOSED', `port ${port} of sandbox ${id} is not exposed (network.ports)`, { port })
    const done = this.o.sandboxes.hold(id)
    try {
      await this.o.sandboxes.hibernation.awake(s.owner, id)
      if (this.o.fleet)
        return {
          host: 'sandbox',
          port,
          done,
          agent: tunnelAgent((onData) => this.o.agent.connectPort(id, port, onData)),
        }
      return { host: await this.o.agent.sandboxAddress(id), port, done }
    } catch (err) {
      done()
      throw err
    }
  }

  /** Runs `fn` against the running sandbox without waking it or counting it busy: a look, not a use. */
  async peek<T>(owner: string, id: string, fn: (sandbox: AgentSandbox) => Promise<T>): Promise<T> {
    await this.o.sandboxes.running(owner, id)
    return fn(this.o.agent.sandbox(id))
  }
}
