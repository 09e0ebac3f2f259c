// The runtime parts for browsers and edge runtimes (Cloudflare Workers, Vercel Edge): no file
// system, no process, the global WebSocket. Exports what node.ts exports, with the same types.
import { ForkboxError } from '../errors.ts'
import type * as Node from './node.ts'
import type { SocketHandlers, SocketLike } from './socket.ts'

function unsupported(what: string): ForkboxError {
  return new ForkboxError('UNSUPPORTED_BY_RUNTIME', `${what} needs a file system: use the Node build of @forkbox/sdk`)
}

// btoa/atob take "binary strings" (one char per byte)
const CHUNK = 0x8000

export const toBase64: typeof Node.toBase64 = (data) => {
  let binary = ''
  for (let i = 0; i < data.length; i += CHUNK) binary += String.fromCharCode(...data.subarray(i, i + CHUNK))
  return btoa(binary)
}

export const fromBase64: typeof Node.fromBase64 = (text) => {
  const binary = atob(text)
  const out = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i)
  return out
}

/** Workers with Node compatibility have a `process.env`; browsers have none. */
export const environment: typeof Node.environment = () =>
  (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env ?? {}

export const defaultCredentialsPath: typeof Node.defaultCredentialsPath = () => '(no credentials file in this runtime)'

export const readTextFile: typeof Node.readTextFile = () => undefined

export const writePrivateFile: typeof Node.writePrivateFile = () => {
  throw unsupported('writing the credentials file')
}

export const localPathKind: typeof Node.localPathKind = async () => {
  throw unsupported('a build context or archive given by path')
}

export const readLocalText: typeof Node.readLocalText = async () => {
  throw unsupported('reading a local file')
}

export const readLocalFile: typeof Node.readLocalFile = () => {
  throw unsupported('reading a local file')
}

export const tarDirectory: typeof Node.tarDirectory = () => {
  throw unsupported('a build context given by path')
}

export const joinPath: typeof Node.joinPath = (...parts) => parts.join('/')

/** Browsers cannot set headers on a WebSocket: the key goes in `?key=`, which terminals accept. */
export const openSocket: typeof Node.openSocket = (url: URL, apiKey: string, on: SocketHandlers): SocketLike => {
  const withKey = new URL(url)
  withKey.searchParams.set('key', apiKey)
  const ws = new WebSocket(withKey)
  ws.binaryType = 'arraybuffer'
  ws.addEventListener('open', () => on.open())
  ws.addEventListener('message', (ev: MessageEvent) =>
    typeof ev.data === 'string' ? on.text(ev.data) : on.binary(new Uint8Array(ev.data as ArrayBuffer)),
  )
  ws.addEventListener('error', () => on.error(new Error('the WebSocket failed')))
  ws.addEventListener('close', () => on.close())
  return { send: (data) => ws.send(data), close: () => ws.close() }
}
