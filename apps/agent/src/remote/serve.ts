// Serves an agent to control planes over WebSocket: every `AgentApi` call, its streams and its
// flow control ride one authenticated connection per control-plane replica.
import { timingSafeEqual } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import {
  type AgentApi,
  AppError,
  agentRemoteMethods,
  agentSandboxMethods,
  RpcPeer,
  type RpcTarget,
} from '@forkbox/protocol'
import { type RawData, type WebSocket, WebSocketServer } from 'ws'

export const AGENT_RPC_PATH = '/v1/agent/rpc'

/** A control plane's call frames can be large (file chunks); anything bigger is refused. */
const MAX_FRAME_BYTES = 16 * 1024 * 1024

export interface AgentRpcServerOptions {
  /** The secret a control plane must present (null: none yet, refuse everyone). */
  credential: () => string | null
  onError?: (err: unknown) => void
}

export interface AgentRpcServer {
  /** For the HTTP server's 'upgrade' event. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void
  /** Control planes connected now. */
  connections(): number
  close(): void
}

function bearerMatches(header: string | undefined, secret: string | null): boolean {
  if (!secret || !header?.startsWith('Bearer ')) return false
  const given = Buffer.from(header.slice(7))
  const want = Buffer.from(secret)
  return given.length === want.length && timingSafeEqual(given, want)
}

function bytesOf(data: RawData): Uint8Array {
  if (Array.isArray(data)) return Buffer.concat(data)
  return data instanceof ArrayBuffer ? new Uint8Array(data) : data
}

export function agentRpcServer(agent: AgentApi, opts: AgentRpcServerOptions): AgentRpcServer {
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES })
  // a sandbox's calls go by their own names with its id first: `exec(id, req, …)`
  const target: RpcTarget = Object.fromEntries([
    ...agentRemoteMethods.map((m) => [m, (...args: unknown[]) => (agent[m] as (...a: unknown[]) => unknown)(...args)]),
    ...agentSandboxMethods.map((m) => [
      m,
      (id: unknown, ...args: unknown[]) => {
        if (typeof id !== 'string') throw new AppError('VALIDATION_FAILED', `${m}: the sandbox id is not a string`)
        return (agent.sandbox(id)[m] as (...a: unknown[]) => unknown)(...args)
      },
    ]),
  ])
  const peers = new Set<RpcPeer>()
  agent.onExit((id, reason, message) => {
    for (const p of peers) p.emit('exit', [id, reason, message])
  })
  const serve = (ws: WebSocket) => {
    const peer = new RpcPeer({ send: (frame) => ws.send(frame) }, target)
    peers.add(peer)
    ws.on('message', (data) => {
      try {
        peer.receive(bytesOf(data))
      } catch (err) {
        opts.onError?.(err)
        ws.close(1002, 'protocol error')
      }
    })
    ws.on('close', () => {
      peers.delete(peer)
      // what the control plane was waiting for stops: its calls' signals fire
      peer.close(new AppError('CANCELLED', 'the control plane went away'))
    })
    ws.on('error', (err) => opts.onError?.(err))
  }
  return {
    upgrade(req, socket, head) {
      const path = new URL(req.url ?? '/', 'http://agent').pathname
      if (path !== AGENT_RPC_PATH || !bearerMatches(req.headers.authorization, opts.credential())) {
        socket.end('HTTP/1.1 401 Unauthorized\r\nconnection: close\r\ncontent-length: 0\r\n\r\n')
        return
      }
      wss.handleUpgrade(req, socket, head, serve)
    },
    connections: () => peers.size,
    close() {
      for (const ws of wss.clients) ws.terminate()
      wss.close()
    },
  }
}
