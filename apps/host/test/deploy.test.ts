// The deployment files and docs name only settings that exist: every FORKBOX_* variable in them
// is one the host reads, and every port is one a process listens on by default.
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { ENV_VARS, loadAgentHostConfig, loadServerHostConfig } from '../src/config.ts'

const root = new URL('../../../', import.meta.url).pathname

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)],
  )
}

describe('deployment files', () => {
  const sources = [...files(join(root, 'deploy')), join(root, 'docs/deploy.md')]

  it('name only variables the host reads', () => {
    const known = new Set(ENV_VARS)
    for (const f of sources)
      for (const [name] of readFileSync(f, 'utf8').matchAll(/FORKBOX_[A-Z0-9_]+/g))
        assert.ok(known.has(name), `${f} names ${name}, which no config reads`)
  })

  it('use the ports the processes listen on', () => {
    const server = loadServerHostConfig({}, {}).port
    const agent = loadAgentHostConfig({ controlPlaneUrl: 'http://cp', joinToken: 'x'.repeat(16) }, {}).port
    const unit = (name: string) => readFileSync(join(root, 'deploy/systemd', name), 'utf8')
    assert.match(unit('forkbox-server.service'), new RegExp(`--port ${server}\\b`))
    assert.match(unit('forkbox-agent.service'), new RegExp(`--port ${agent}\\b`))
    for (const f of sources)
      for (const [, port] of readFileSync(f, 'utf8').matchAll(/:(74\d\d)\b/g))
        assert.ok([String(server), String(agent)].includes(port ?? ''), `${f} uses port ${port}`)
  })
})
