// The control plane's side of a host agent on another machine: the `AgentApi` over one
// WebSocket, opened on first use and again after it drops.
import type {
  AgentApi,
  AgentRemoteMethod,
  AgentSandboxMethod,
  SandboxErrorReason,
  SandboxExitListener,
} from '@forkbox/protocol'
import { AppError, agentRemoteCalls, agentSandboxCalls, RpcPeer } from '@forkbox/protocol'
import { type RawData, WebSocket } from 'ws'

/** Where the agent serves calls (its `AGENT_RPC_PATH`), under its base URL (which may have a path). */
const RPC_PATH = 'v1/agent/rpc'
const PING_INTERVAL_MS = 5_000
const CONNECT_TIMEOUT_MS = 5_000

export interface RemoteAgentOptions {
  /** The agent's base URL (`http://10.0.0.5:7412`). */
  url: string
  /** The secret the agent accepts calls with (changes when it joins again). */
  credential: () => Promise<string>
  /** What it is called in errors and logs. */
  name: string
  onDisconnect?: (err: Error) => void
}

function bytesOf(data: RawData): Uint8Array {
  if (Array.isArray(data)) return Buffer.concat(data)
  return data instanceof ArrayBuffer ? new Uint8Array(data) : data
}

/** The connection to one agent: opened on first use and again after it drops; the exits it tells. */
class AgentLink {
  private peer: Promise<RpcPeer> | null = null
  private socket: WebSocket | null = null
  private readonly exitListeners: SandboxExitListener[] = []
  private closed = false

  constructor(private readonly opts: RemoteAgentOptions) {}

  private unreachable(why: string): AppError {
    return new AppError('HOST_UNREACHABLE', `host ${this.opts.name} is unreachable: ${why}`, { host: this.opts.name })
  }

  private connect(): Promise<RpcPeer> {
    if (this.closed) return Promise.reject(this.unreachable('the client is closed'))
    if (this.peer) return this.peer
    const opening = this.open()
    this.peer = opening
    opening.catch(() => {
      if (this.peer === opening) this.peer = null
    })
    return opening
  }

  private async open(): Promise<RpcPeer> {
    const credential = await this.opts.credential()
    const base = this.opts.url.endsWith('/') ? this.opts.url : `${this.opts.url}/`
    const ws = new WebSocket(new URL(RPC_PATH, base), {
      headers: { authorization: `Bearer ${credential}` },
      handshakeTimeout: CONNECT_TIMEOUT_MS,
      maxPayload: 64 * 1024 * 1024,
      perMessageDeflate: false,
    })
    const peer = new RpcPeer({ send: (frame) => ws.send(frame) }, {}, (name, args) => this.event(name, args))
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve())
      ws.once('unexpected-response', (_req, res) => reject(this.unreachable(`it answered ${res.statusCode}`)))
      ws.once('error', (err) => reject(this.unreachable(err.message)))
    })
    this.socket = ws
    let alive = true
    const ping = setInterval(() => {
      if (!alive) return ws.terminate()
      alive = false
      ws.ping()
    }, PING_INTERVAL_MS)
    ping.unref()
    ws.on('pong', () => {
      alive = true
    })
    ws.on('message', (data) => {
      try {
        peer.receive(bytesOf(data))
      } catch {
        ws.close(1002, 'protocol error')
      }
    })
    ws.on('error', () => {})
    ws.once('close', () => {
      clearInterval(ping)
      const err = this.unreachable('the connection dropped')
      peer.close(err)
      if (this.socket === ws) {
        this.socket = null
        this.peer = null
      }
      if (!this.closed) this.opts.onDisconnect?.(err)
    })
    return peer
  }

  private event(name: string, args: unknown[]): void {
    if (name !== 'exit') return
    const [id, reason, message] = args
    if (typeof id !== 'string') return
    for (const l of this.exitListeners)
      l(
        id,
        (typeof reason === 'string' ? reason : null) as SandboxErrorReason | null,
        typeof message === 'string' ? message : null,
      )
  }

  call(method: AgentRemoteMethod | AgentSandboxMethod, args: unknown[]): Promise<unknown> {
    return this.connect().then((peer) => peer.call(method, args))
  }

  onExit(listener: SandboxExitListener): void {
    this.exitListeners.push(listener)
  }
  async close(): Promise<void> {
    this.closed = true
    this.socket?.close(1000, 'closing')
    this.socket = null
    this.peer = null
  }
}

/** The `AgentApi` of a host agent on another machine. */
export type RemoteAgent = AgentApi

export function remoteAgent(opts: RemoteAgentOptions): RemoteAgent {
  const link = new AgentLink(opts)
  return {
    ...agentRemoteCalls((method, args) => link.call(method, args)),
    // a sandbox's calls go by their own names with its id first (the agent's side takes it off)
    sandbox: (id) => agentSandboxCalls((method, args) => link.call(method, [id, ...args])),
    onExit: (listener) => link.onExit(listener),
    close: () => link.close(),
  }
}
