// The one fake the SDK tests use: a `fetch` that records requests and answers from a handler.
import assert from 'node:assert/strict'
import type { Sandbox as SandboxInfo } from '@forkbox/protocol'

export interface RecordedRequest {
  method: string
  url: URL
  headers: Headers
  body: Uint8Array
}

export type FakeHandler = (req: RecordedRequest, index: number) => Response | Promise<Response>

export interface FakeFetch {
  fetch: typeof fetch
  requests: RecordedRequest[]
}

export function fakeFetch(handler: FakeHandler): FakeFetch {
  const requests: RecordedRequest[] = []
  const fetchImpl = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init)
    const recorded: RecordedRequest = {
      method: request.method,
      url: new URL(request.url),
      headers: request.headers,
      body: new Uint8Array(await request.arrayBuffer()),
    }
    requests.push(recorded)
    return handler(recorded, requests.length - 1)
  }
  return { fetch: fetchImpl as typeof fetch, requests }
}

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } })
}

export function errorResponse(
  status: number,
  code: string,
  message = 'nope',
  details?: Record<string, unknown>,
  headers: Record<string, string> = {},
): Response {
  return json(status, { error: { code, message, details, requestId: 'req_123' } }, headers)
}

export function bodyJson(req: RecordedRequest | undefined): unknown {
  assert.ok(req, 'no such request')
  return JSON.parse(new TextDecoder().decode(req.body))
}

export function sandboxInfo(overrides: Partial<SandboxInfo> = {}): SandboxInfo {
  return {
    id: 'sbx_1',
    template: 'base',
    state: 'running',
    metadata: {},
    resources: { vcpus: 1, memoryMB: 512, diskMB: 1024, pids: 256 },
    persistent: false,
    createdAt: '2025-01-01T00:00:00.000Z',
    expiresAt: '2025-01-01T00:05:00.000Z',
    endedAt: null,
    errorReason: null,
    errorMessage: null,
    network: { internet: false, allowOut: [], denyOut: [], ports: [] },
    accessToken: 'fbt_test',
    domain: 'localhost',
    ...overrides,
  }
}

/** Connection options every test uses: a key, a URL and the fake. */
export function conn(fake: FakeFetch) {
  return { apiKey: 'fbx_test', url: 'http://forkbox.test', fetch: fake.fetch }
}
