// An in-process control plane over a FakeAgent on a scratch database: what a server test file
// starts before each test and closes after it.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type ControlPlane, createControlPlane } from '../src/index.ts'
import { FakeAgent } from './fake-agent.ts'

export interface TestControlPlane {
  cp: ControlPlane
  agent: FakeAgent
  close(): Promise<void>
}

export async function fakeControlPlane(name: string): Promise<TestControlPlane> {
  const dir = mkdtempSync(join(tmpdir(), `fbx-${name}-`))
  const agent = new FakeAgent()
  const cp = await createControlPlane({
    agent,
    config: { dbPath: join(dir, 'db.sqlite'), logLevel: 'silent', reaperIntervalMs: 60_000 },
  })
  return {
    cp,
    agent,
    async close() {
      await cp.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
