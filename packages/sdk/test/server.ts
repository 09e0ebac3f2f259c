// The real control plane (the server's hono app over a fake agent) in-process, reached by the SDK
// through an injected fetch: no ports, and a route the SDK calls that the server lacks fails here.
// Faults (429, 503, a refused connection, a request that never answers) are queued in front of it.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach } from 'node:test'
import type { ErrorCode } from '@forkbox/protocol'
import { type ControlPlane, createControlPlane, type ServerConfigInput } from '../../../apps/server/src/index.ts'
import { BuildAgent } from './build-agent.ts'

export interface SeenRequest {
  method: string
  url: URL
  headers: Headers
  body: Uint8Array
}

/** What the next request gets instead of reaching the app. */
export type Fault = { status: number; code: ErrorCode; retryAfterSeconds?: number } | { refuse: true } | { hang: true }

export interface TestServer {
  cp: ControlPlane
  agent: BuildAgent
  /** An admin key. */
  apiKey: string
  url: string
  fetch: typeof fetch
  /** Every request the SDK made, faulted or not. */
  requests: SeenRequest[]
  /** Served first, one per request, before requests reach the app again. */
  faults: Fault[]
  /** Connection options: the admin key, the URL and the in-process fetch. */
  conn(): { apiKey: string; url: string; fetch: typeof fetch }
}

const URL_BASE = 'http://forkbox.test'

function faultResponse(fault: Fault, signal: AbortSignal | null | undefined): Promise<Response> {
  if ('refuse' in fault) {
    return Promise.reject(new TypeError('fetch failed', { cause: new Error(`connect ECONNREFUSED ${URL_BASE}`) }))
  }
  if ('hang' in fault) {
    return new Promise((_, reject) => {
      if (signal?.aborted) reject(signal.reason)
      signal?.addEventListener('abort', () => reject(signal.reason), { once: true })
    })
  }
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': 'req_fault' }
  if (fault.retryAfterSeconds !== undefined) headers['retry-after'] = String(fault.retryAfterSeconds)
  const body = { error: { code: fault.code, message: `injected ${fault.code}`, requestId: 'req_fault' } }
  return Promise.resolve(new Response(JSON.stringify(body), { status: fault.status, headers }))
}

/** Starts a server before each test of the calling file and closes it after; read it through the getter. */
export function useTestServer(config: Partial<ServerConfigInput> = {}): () => TestServer {
  let server: TestServer | undefined
  let dir = ''
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'forkbox-sdk-'))
    const agent = new BuildAgent()
    const cp = await createControlPlane({
      agent,
      config: {
        dbPath: join(dir, 'db.sqlite'),
        logLevel: 'silent',
        reaperIntervalMs: 60_000,
        // the fake agent refuses SANDBOX_MOVING for ever: the server's resends give up soon
        movingRetrySeconds: 0.3,
        ...config,
      },
    })
    const apiKey = cp.bootstrapKey
    if (!apiKey) throw new Error('a new store has a bootstrap key')
    const requests: SeenRequest[] = []
    const faults: Fault[] = []
    const fetchImpl = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
      const request = new Request(input, init)
      requests.push({
        method: request.method,
        url: new URL(request.url),
        headers: request.headers,
        body: new Uint8Array(await request.clone().arrayBuffer()),
      })
      const fault = faults.shift()
      if (fault) return faultResponse(fault, init?.signal)
      // as a real fetch does, an abort rejects at once (the app sees it too, through the request's signal)
      const signal = init?.signal
      const response = Promise.resolve(cp.app.fetch(request))
      if (!signal) return response
      return new Promise<Response>((resolve, reject) => {
        if (signal.aborted) reject(signal.reason)
        signal.addEventListener('abort', () => reject(signal.reason), { once: true })
        response.then(resolve, reject)
      })
    }
    const fetch = fetchImpl as typeof globalThis.fetch
    server = {
      cp,
      agent,
      apiKey,
      url: URL_BASE,
      fetch,
      requests,
      faults,
      conn: () => ({ apiKey, url: URL_BASE, fetch }),
    }
  })
  afterEach(async () => {
    await server?.cp.close()
    server = undefined
    rmSync(dir, { recursive: true, force: true })
  })
  return () => {
    if (!server) throw new Error('the test server exists only inside a test')
    return server
  }
}

/** The JSON body of a recorded request. */
export function bodyJson(req: SeenRequest | undefined): unknown {
  if (!req) throw new Error('no such request')
  return JSON.parse(new TextDecoder().decode(req.body))
}
