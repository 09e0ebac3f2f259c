// Publishing approves a version (issue 31, items 3 and 8) on real runsc builds: tenant A's template,
// published once by the admin, is rebuilt by A; tenant B's sandboxes and B's own `FROM forkbox:`
// builds keep the approved version until the admin publishes again, and B never reads A's builds.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type CreatedKey, ForkboxClient, type ForkboxError, Sandbox } from '@forkbox/sdk'
import { useTestHost } from './harness.ts'

const host = useTestHost()
const admin = () => new ForkboxClient({ ...host().conn, maxRetries: 0 })
const as = (key: CreatedKey) => ({ url: host().conn.url, apiKey: key.key, maxRetries: 0 })
const name = `shared-${process.pid}`
const child = `child-${process.pid}`

/** What a sandbox of `template`, made by `key`, finds in `path` (then it is killed). */
async function readIn(key: CreatedKey, template: string, path: string): Promise<string> {
  const sbx = await Sandbox.create({ ...as(key), template })
  try {
    const r = await sbx.exec(['cat', path])
    assert.equal(r.exitCode, 0, r.stderr)
    return r.stdout.trim()
  } finally {
    await sbx.kill()
  }
}

/** The admin key's publish call (raw: the SDK has no admin call for it). */
async function publish(templateId: string, body: Record<string, unknown> = { public: true }) {
  const res = await fetch(`${host().conn.url}/v1/templates/by-id/${templateId}/public`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${host().conn.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  const json = (await res.json()) as { public: boolean; publishedVersion: number | null }
  assert.equal(res.status, 200, JSON.stringify(json))
  return json
}

async function status(key: CreatedKey, path: string): Promise<number> {
  const res = await fetch(`${host().conn.url}${path}`, { headers: { authorization: `Bearer ${key.key}` } })
  await res.body?.cancel()
  return res.status
}

describe('publishing approves a version', () => {
  it("another key gets the published build of a template, not its owner's later builds, until the admin publishes again", async () => {
    const a = await admin().keys.create('publisher-a')
    const b = await admin().keys.create('consumer-b')
    const ownerTemplates = new ForkboxClient(as(a)).templates
    const otherTemplates = new ForkboxClient(as(b)).templates
    // the marker's text is this run's own: a step the layer cache kept from another run is not reused
    const marker = (v: string) => `${v}-${process.pid}`
    const dockerfile = (v: string) => `FROM forkbox:base\nRUN echo ${marker(v)} > /marker\n`

    const v1 = await ownerTemplates.build({ name, dockerfile: dockerfile('v1') })
    assert.equal(v1.version, 1)
    const published = await publish(v1.templateId)
    assert.deepEqual([published.public, published.publishedVersion], [true, 1])
    assert.equal(await readIn(b, name, '/marker'), marker('v1'))

    // A rebuilds: its own sandboxes get v2, nobody else's do
    const v2 = await ownerTemplates.build({ name, dockerfile: dockerfile('v2') })
    assert.equal(v2.version, 2)
    assert.equal(await readIn(a, name, '/marker'), marker('v2'))
    assert.equal(await readIn(b, name, '/marker'), marker('v1'))
    const refused = await Sandbox.create({ ...as(b), template: `${name}@2` }).then(
      () => null,
      (e: ForkboxError) => e,
    )
    assert.equal(refused?.code, 'TEMPLATE_NOT_FOUND')
    const seen = await otherTemplates.get(name)
    assert.deepEqual([seen.version, seen.publishedVersion, seen.builds], [1, 1, []])
    assert.equal((await otherTemplates.list()).find((t) => t.name === name)?.version, 1)

    // B's own build FROM forkbox:NAME starts from the published build too
    const childFile = `FROM forkbox:${name}\nRUN cp /marker /from-parent\n`
    const c1 = await otherTemplates.build({ name: child, dockerfile: childFile })
    assert.equal(await readIn(b, child, '/from-parent'), marker('v1'))

    // A's builds and their logs are A's (and the admin's), not B's
    for (const id of [v1.id, v2.id])
      for (const path of [`/v1/builds/${id}`, `/v1/builds/${id}/logs`]) {
        assert.equal(await status(b, path), 404, path)
        assert.equal(await status(a, path), 200, path)
      }

    // the admin publishes again: v2 is what B gets, for sandboxes and builds
    assert.equal((await publish(v1.templateId)).publishedVersion, 2)
    assert.equal(await readIn(b, name, '/marker'), marker('v2'))
    const c2 = await otherTemplates.build({ name: child, dockerfile: childFile })
    assert.equal(c2.version, c1.version + 1)
    assert.equal(await readIn(b, child, '/from-parent'), marker('v2'))

    // unpublished: private to A again
    await publish(v1.templateId, { public: false })
    const gone = await Sandbox.create({ ...as(b), template: name }).then(
      () => null,
      (e: ForkboxError) => e,
    )
    assert.equal(gone?.code, 'TEMPLATE_NOT_FOUND')
    await otherTemplates.delete(child)
    await ownerTemplates.delete(name)
  })
})
