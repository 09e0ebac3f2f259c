// The little of a WebSocket the terminal needs, so each runtime can give its own.

export interface SocketHandlers {
  open(): void
  text(data: string): void
  binary(data: Uint8Array): void
  /** The server answered the upgrade with an HTTP status instead (Node only; browsers see an error). */
  refused(status: number): void
  error(err: Error): void
  close(): void
}

export interface SocketLike {
  send(data: string | Uint8Array): void
  close(): void
}
