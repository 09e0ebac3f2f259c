// An HTTP agent whose sockets are `AgentApi.connectPort` connections: how the port proxy reaches
// a sandbox on another machine (its address is only routable on its own host).
import { Agent } from 'node:http'
import { Duplex } from 'node:stream'
import type { PortConnection } from '@forkbox/protocol'

type Connect = (onData: (chunk: Uint8Array) => Promise<void>) => Promise<PortConnection>

/** A socket-shaped stream over a port connection (what http and http-proxy call on a socket is there). */
class TunnelSocket extends Duplex {
  private conn: PortConnection | null = null
  private wanted: (() => void) | null = null

  /** Takes a chunk from the sandbox; settles once the reader has room again (flow control). */
  deliver(chunk: Uint8Array): Promise<void> {
    if (this.destroyed) return Promise.resolve()
    if (this.push(chunk)) return Promise.resolve()
    return new Promise((resolve) => {
      this.wanted = resolve
    })
  }

  attach(conn: PortConnection): void {
    this.conn = conn
    conn.closed.then(
      () => this.push(null),
      (err: unknown) => this.destroy(err instanceof Error ? err : new Error(String(err))),
    )
  }

  override _read(): void {
    const w = this.wanted
    this.wanted = null
    w?.()
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (!this.conn) {
      cb(new Error('not connected'))
      return
    }
    this.conn.write(chunk).then(
      () => cb(),
      (err: unknown) => cb(err instanceof Error ? err : new Error(String(err))),
    )
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.conn?.end()
    cb()
  }

  override _destroy(err: Error | null, cb: (err: Error | null) => void): void {
    this.conn?.destroy()
    this.wanted?.()
    cb(err)
  }

  setTimeout(): this {
    return this
  }
  setNoDelay(): this {
    return this
  }
  setKeepAlive(): this {
    return this
  }
  ref(): this {
    return this
  }
  unref(): this {
    return this
  }
}

/** One connection per request (no keep-alive: each proxied exchange is its own tunnel). */
export function tunnelAgent(connect: Connect): Agent {
  const agent = new Agent({ keepAlive: false })
  // Node's Agent takes a socket from createConnection's callback when it comes asynchronously
  const create = (_opts: unknown, cb: (err: Error | null, socket?: Duplex) => void) => {
    const socket = new TunnelSocket()
    connect((chunk) => socket.deliver(chunk)).then(
      (conn) => {
        socket.attach(conn)
        cb(null, socket)
      },
      (err: unknown) => cb(err instanceof Error ? err : new Error(String(err))),
    )
    return undefined
  }
  ;(agent as unknown as { createConnection: typeof create }).createConnection = create
  return agent
}
