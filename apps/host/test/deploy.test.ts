// The deployment files and docs name only settings that exist: every FORKBOX_* variable in them
// is one the host reads, and every port is one a process listens on by default.
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { DaemonSet, Deployment } from 'kubernetes-models/apps/v1'
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1'
import { Namespace, Service } from 'kubernetes-models/v1'
import { parseAllDocuments } from 'yaml'
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
    const ports = [String(server), String(agent)]
    for (const f of sources) {
      const text = readFileSync(f, 'utf8')
      for (const [, port] of text.matchAll(/:(74\d\d)\b/g))
        assert.ok(ports.includes(port ?? ''), `${f} uses port ${port}`)
      for (const [, port] of text.matchAll(/(?:containerPort|hostPort|port|--port):?\s+"?(\d+)/g))
        assert.ok(ports.includes(port ?? ''), `${f} uses port ${port}`)
    }
  })

  it('Kubernetes manifests are valid against the Kubernetes schemas, and kustomize lists them all', () => {
    const dir = join(root, 'deploy/kubernetes')
    const models: Record<string, new (o: never) => { validate(): void }> = {
      'v1/Namespace': Namespace,
      'v1/Service': Service,
      'apps/v1/Deployment': Deployment,
      'apps/v1/DaemonSet': DaemonSet,
      'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
    }
    const kustomization = parseAllDocuments(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'))[0]?.toJS() as {
      resources: string[]
    }
    const manifests = readdirSync(dir).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
    assert.deepEqual([...kustomization.resources].sort(), manifests.sort())
    const kinds: string[] = []
    for (const f of manifests)
      for (const doc of parseAllDocuments(readFileSync(join(dir, f), 'utf8'))) {
        assert.deepEqual(doc.errors, [], `${f}: YAML errors`)
        const obj = doc.toJS() as { apiVersion: string; kind: string }
        const Model = models[`${obj.apiVersion}/${obj.kind}`]
        assert.ok(Model, `${f}: no schema known for ${obj.apiVersion} ${obj.kind}`)
        new Model(obj as never).validate()
        kinds.push(obj.kind)
      }
    assert.deepEqual(kinds.sort(), ['DaemonSet', 'Deployment', 'Namespace', 'PodDisruptionBudget', 'Service'])
  })
})
