// A fresh control plane per test over a FakeAgent, and `call` to speak JSON to its app: what the
// REST API test files share. The bindings are live: a test that restarts the plane swaps them.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach } from 'node:test'
import { type ControlPlane, createControlPlane } from '../src/index.ts'
import { FakeAgent } from './fake-agent.ts'

export let dir: string
export let agent: FakeAgent
export let cp: ControlPlane
export let key: string

/** Starts a control plane before each test of the calling suite and closes it after. */
export function useControlPlane(): void {
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fbx-server-'))
    agent = new FakeAgent()
    cp = await createControlPlane({
      agent,
      config: { dbPath: join(dir, 'db.sqlite'), logLevel: 'silent', reaperIntervalMs: 60_000 },
    })
    key = cp.bootstrapKey as string
  })

  afterEach(async () => {
    await cp.close()
    rmSync(dir, { recursive: true, force: true })
  })
}

/** For a test that restarts the plane: the one `afterEach` closes. */
export function setControlPlane(next: ControlPlane): void {
  cp = next
}

/** For a test that restarts the agent process. */
export function setAgent(next: FakeAgent): void {
  agent = next
}

export async function call(method: string, path: string, body?: unknown, k: string | null = key) {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (k) headers.authorization = `Bearer ${k}`
  const res = await cp.app.request(path, {
    method,
    headers,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  })
  const text = await res.text()
  return {
    status: res.status,
    body: text ? JSON.parse(text) : null,
    requestId: res.headers.get('x-request-id'),
    version: res.headers.get('forkbox-version'),
  }
}
