// What the SDK needs that only some runtimes have, as Node (and Deno, Bun) provide it: the
// environment, the credentials file, local build contexts, and WebSockets that can send headers.
// The browser/edge build swaps this module for web.ts (tsdown.config.ts); both export the same names.
import { Buffer } from 'node:buffer'
import { createReadStream, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { readFile, stat } from 'node:fs/promises'
import { homedir } from 'node:os'
import { dirname, isAbsolute, join } from 'node:path'
import WebSocket from 'ws'
import type { SocketHandlers, SocketLike } from './socket.ts'

export { tarDirectory } from './tar-directory.ts'

export function toBase64(data: Uint8Array): string {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64')
}

/** A plain Uint8Array copy, so callers never hold a view onto Buffer's shared pool. */
export function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(Buffer.from(text, 'base64'))
}

/** The process environment, for FORKBOX_API_KEY / FORKBOX_URL. */
export function environment(): Record<string, string | undefined> {
  return process.env
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value
}

/** `$XDG_CONFIG_HOME/forkbox/credentials.json`, else `~/.config/forkbox/credentials.json`. */
export function defaultCredentialsPath(env: Record<string, string | undefined>): string {
  const xdg = nonEmpty(env.XDG_CONFIG_HOME)
  // The XDG spec says relative values are to be ignored.
  const base = xdg && isAbsolute(xdg) ? xdg : join(nonEmpty(env.HOME) ?? homedir(), '.config')
  return join(base, 'forkbox', 'credentials.json')
}

/** A file's text; undefined when it does not exist. */
export function readTextFile(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw err
  }
}

/** Writes `text` to `path` with mode 0600 through a rename, so a reader never sees half of it. */
export function writePrivateFile(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  const tmp = `${path}.${process.pid}.tmp`
  writeFileSync(tmp, text, { mode: 0o600 })
  renameSync(tmp, path)
}

/** What is at a local path, for a build context or image archive given by path. */
export async function localPathKind(path: string): Promise<'directory' | 'file' | 'other'> {
  const st = await stat(path)
  return st.isDirectory() ? 'directory' : st.isFile() ? 'file' : 'other'
}

export function readLocalText(path: string, signal?: AbortSignal): Promise<string> {
  return readFile(path, { encoding: 'utf8', signal })
}

export function readLocalFile(path: string): AsyncIterable<Uint8Array> {
  return createReadStream(path)
}

export function joinPath(...parts: string[]): string {
  return join(...parts)
}

/** A WebSocket carrying the key in the Authorization header. */
export function openSocket(url: URL, apiKey: string, on: SocketHandlers): SocketLike {
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${apiKey}` } })
  ws.on('open', on.open)
  ws.on('message', (data: Buffer, isBinary: boolean) =>
    isBinary ? on.binary(new Uint8Array(data)) : on.text(data.toString()),
  )
  ws.on('unexpected-response', (_req, res) => on.refused(res.statusCode ?? 0))
  ws.on('error', on.error)
  ws.on('close', on.close)
  return {
    send: (data) => ws.send(data, { binary: typeof data !== 'string' }),
    close: () => ws.close(),
  }
}
