// Terminals: a program (default a login bash) on a pseudo-terminal in the sandbox, over a WebSocket.
import { toBytes } from './encoding.ts'
import { ForkboxError } from './errors.ts'
import { type HttpClient, pathOf } from './http.ts'
import { openSocket } from './platform/index.ts'
import type { SocketLike } from './platform/socket.ts'

export interface PtyOptions {
  cols?: number
  rows?: number
  /** Run this under `bash -c` instead of a login shell; or `argv` to exec directly. */
  cmd?: string
  argv?: string[]
  cwd?: string
  envs?: Record<string, string>
  user?: string
  /** Everything the terminal prints, raw bytes (escape sequences included). */
  onData: (data: Uint8Array) => void
}

export interface PtyExit {
  exitCode: number
  signal: string | null
}

export class PtyHandle {
  readonly pid: number
  readonly #socket: SocketLike
  readonly #exit: Promise<PtyExit>

  constructor(socket: SocketLike, pid: number, exit: Promise<PtyExit>) {
    this.#socket = socket
    this.pid = pid
    this.#exit = exit
  }

  /** Keystrokes, as the terminal would receive them ("\x03" is ^C). */
  sendInput(data: string | Uint8Array): void {
    this.#socket.send(toBytes(data))
  }

  resize(cols: number, rows: number): void {
    this.#socket.send(JSON.stringify({ type: 'resize', cols, rows }))
  }

  /** Signals the program's process group (default SIGKILL). */
  kill(signal = 'SIGKILL'): void {
    this.#socket.send(JSON.stringify({ type: 'kill', signal }))
  }

  /** Resolves when the program exits. */
  wait(): Promise<PtyExit> {
    return this.#exit
  }

  /** Closes the connection: the program gets SIGHUP, as when a terminal window closes. */
  disconnect(): void {
    this.#socket.close()
  }
}

export class Pty {
  readonly #http: HttpClient
  readonly #sandboxId: string

  constructor(http: HttpClient, sandboxId: string) {
    this.#http = http
    this.#sandboxId = sandboxId
  }

  /** Starts a program on a new terminal; resolves once it runs. */
  create(options: PtyOptions): Promise<PtyHandle> {
    const url = new URL(`${pathOf('v1', 'sandboxes', this.#sandboxId)}/pty`, this.#http.url)
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:'
    const { onData, cols, rows, cmd, argv, cwd, envs, user } = options
    return new Promise((resolve, reject) => {
      let settleExit!: (e: PtyExit) => void
      let failExit!: (err: Error) => void
      const exit = new Promise<PtyExit>((res, rej) => {
        settleExit = res
        failExit = rej
      })
      exit.catch(() => {})
      const socket: SocketLike = openSocket(url, this.#http.apiKey, {
        open: () => socket.send(JSON.stringify({ type: 'start', cols, rows, cmd, argv, cwd, envs, user })),
        binary: onData,
        text: (data) => {
          const msg = JSON.parse(data) as {
            type: string
            pid?: number
            error?: { code: string; message: string }
          } & PtyExit
          if (msg.type === 'started') resolve(new PtyHandle(socket, Number(msg.pid), exit))
          else if (msg.type === 'exit') settleExit({ exitCode: msg.exitCode, signal: msg.signal })
          else if (msg.type === 'error') {
            const err = new ForkboxError(msg.error?.code ?? 'INTERNAL', msg.error?.message ?? 'terminal failed')
            failExit(err)
            reject(err)
          }
        },
        refused: (status) =>
          reject(new ForkboxError('UNEXPECTED_RESPONSE', `terminal refused: HTTP ${status}`, { status })),
        error: (err) => {
          const e = new ForkboxError('CONNECTION_ERROR', `terminal connection failed: ${err.message}`, { cause: err })
          failExit(e)
          reject(e)
        },
        close: () =>
          failExit(new ForkboxError('CONNECTION_ERROR', 'the terminal connection closed before the program exited')),
      })
    })
  }
}
