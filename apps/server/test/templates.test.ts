// Templates users build, through the HTTP app over a fake agent: builds and their versions,
// ownership and publishing, logs polled and streamed (resumable), context uploads, restarts.
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, it } from 'node:test'
import { AppError } from '@forkbox/protocol'
import { type ControlPlane, createControlPlane } from '../src/index.ts'
import { FakeAgent } from './fake-agent.ts'

let dir: string
let agent: FakeAgent
let cp: ControlPlane
let key: string

async function start(): Promise<void> {
  agent = new FakeAgent()
  cp = await createControlPlane({
    agent,
    config: { dbPath: join(dir, 'db.sqlite'), logLevel: 'silent', reaperIntervalMs: 60_000, maxContextBytes: 4096 },
  })
}

async function call(method: string, path: string, body?: unknown, k: string = key) {
  const headers: Record<string, string> = { authorization: `Bearer ${k}` }
  let payload: BodyInit | undefined
  if (body instanceof Uint8Array) {
    headers['content-type'] = 'application/x-tar'
    payload = new Blob([new Uint8Array(body)])
  } else if (body !== undefined) {
    headers['content-type'] = 'application/json'
    payload = JSON.stringify(body)
  }
  const res = await cp.app.request(path, { method, headers, body: payload })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : null }
}

async function settled(buildId: string, k = key) {
  for (let i = 0; i < 200; i++) {
    const b = await call('GET', `/v1/builds/${buildId}`, undefined, k)
    if (b.body.status === 'ready' || b.body.status === 'failed') return b.body
    await new Promise((r) => setTimeout(r, 5))
  }
  throw new Error(`build ${buildId} did not finish`)
}

/** A build's SSE log, parsed: every event until the stream ends. */
async function sse(path: string, lastEventId?: string) {
  const headers: Record<string, string> = { authorization: `Bearer ${key}`, accept: 'text/event-stream' }
  if (lastEventId) headers['last-event-id'] = lastEventId
  const res = await cp.app.request(path, { headers })
  const events: { event: string; id?: string; data: { seq?: number; status?: string; message?: string } }[] = []
  for (const block of (await res.text()).split('\n\n')) {
    const fields = Object.fromEntries(
      block
        .split('\n')
        .filter((l) => l && !l.startsWith(':'))
        .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]),
    )
    if (fields.event) events.push({ event: fields.event, id: fields.id, data: JSON.parse(fields.data ?? 'null') })
  }
  return events
}

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fbx-templates-'))
  await start()
  key = cp.bootstrapKey as string
})

afterEach(async () => {
  await cp.close()
  rmSync(dir, { recursive: true, force: true })
})

describe('templates users build', () => {
  it('an image build becomes version 1, listed and creatable by name and name@version', async () => {
    const r = await call('POST', '/v1/templates', { name: 'my-env', image: 'registry.local/team/env:1' })
    assert.equal(r.status, 202, JSON.stringify(r.body))
    assert.equal(r.body.build.version, 1)
    const build = await settled(r.body.build.id)
    assert.equal(build.status, 'ready')
    assert.ok(build.logs.some((l: { message: string }) => /building u-/.test(l.message)))
    const listed = (await call('GET', '/v1/templates')).body.templates
    const mine = listed.find((t: { name: string }) => t.name === 'my-env')
    assert.deepEqual([mine?.version, mine?.public, mine?.id], [1, false, r.body.template.id])
    // a second build is version 2; name alone now means it, name@1 still the first
    const second = await call('POST', '/v1/templates', { name: 'my-env', image: 'registry.local/team/env:2' })
    assert.equal((await settled(second.body.build.id)).status, 'ready')
    const [v1, v2] = [...agent.userTemplates.keys()]
    const newest = await call('POST', '/v1/sandboxes', { template: 'my-env' })
    assert.equal(newest.body.template, 'my-env@2', 'shown as name@version, not as the agent knows it')
    assert.equal((await call('POST', '/v1/sandboxes', { template: 'my-env@1' })).body.template, 'my-env@1')
    assert.deepEqual(
      agent.started.map((s) => s.template),
      [v2, v1],
    )
    const missing = await call('POST', '/v1/sandboxes', { template: 'my-env@3' })
    assert.equal(missing.body.error.code, 'TEMPLATE_NOT_FOUND')
    const got = (await call('GET', '/v1/templates/my-env')).body
    assert.deepEqual(
      got.builds.map((b: { version: number }) => b.version),
      [2, 1],
    )
    assert.equal(got.version, 2)
    assert.ok(!JSON.stringify(got).includes('registry.local'), 'the spec (image, build args) is not returned')
  })

  it('is private to its key until the admin makes it public; the agent name is never a way in', async () => {
    const other = (await call('POST', '/v1/keys', { name: 'other' })).body.key
    const r = await call('POST', '/v1/templates', { name: 'secret-env', image: 'img:1' })
    await settled(r.body.build.id)
    const agentName = [...agent.userTemplates.keys()][0] as string
    for (const template of ['secret-env', agentName]) {
      const denied = await call('POST', '/v1/sandboxes', { template }, other)
      assert.equal(denied.body.error.code, 'TEMPLATE_NOT_FOUND', template)
    }
    assert.equal((await call('POST', '/v1/sandboxes', { template: agentName })).body.error.code, 'TEMPLATE_NOT_FOUND')
    assert.equal((await call('GET', `/v1/builds/${r.body.build.id}`, undefined, other)).status, 404)
    assert.ok(
      !(await call('GET', '/v1/templates', undefined, other)).body.templates.some(
        (t: { name: string }) => t.name === agentName,
      ),
    )
    const publish = await call('PUT', `/v1/templates/by-id/${r.body.template.id}/public`, { public: true }, other)
    assert.equal(publish.status, 403)
    assert.equal(
      (await call('PUT', `/v1/templates/by-id/${r.body.template.id}/public`, { public: true })).body.public,
      true,
    )
    assert.equal((await call('POST', '/v1/sandboxes', { template: 'secret-env' }, other)).status, 201)
    // a public template is not the other key's to delete
    assert.equal((await call('DELETE', '/v1/templates/secret-env', undefined, other)).status, 404)
  })

  it('refuses built-in names, resources above the host maxima and a request with both or neither source', async () => {
    const cases: [unknown, string][] = [
      [{ name: 'base', image: 'x:1' }, 'VALIDATION_FAILED'],
      [{ name: 'big', image: 'x:1', resources: { memoryMB: 64 * 1024 } }, 'RESOURCE_LIMIT_EXCEEDED'],
      [{ name: 'both', image: 'x:1', dockerfile: 'FROM x' }, 'VALIDATION_FAILED'],
      [{ name: 'neither' }, 'VALIDATION_FAILED'],
      [{ name: 'archive-and-image', image: 'x:1', archive: true }, 'VALIDATION_FAILED'],
      [{ name: 'context-no-dockerfile', archive: true, context: true }, 'VALIDATION_FAILED'],
      [{ name: 'Bad Name', image: 'x:1' }, 'VALIDATION_FAILED'],
    ]
    for (const [body, code] of cases) assert.equal((await call('POST', '/v1/templates', body)).body.error.code, code)
  })

  it('a failed build keeps its error and log; the template has no version to create from', async () => {
    agent.buildError = new AppError('IMAGE_NOT_FOUND', 'image nope:1 not found in its registry')
    const r = await call('POST', '/v1/templates', { name: 'broken', image: 'nope:1' })
    const b = await settled(r.body.build.id)
    assert.deepEqual([b.status, b.error?.code], ['failed', 'IMAGE_NOT_FOUND'])
    assert.match(b.logs.at(-1).message, /failed: image nope:1 not found/)
    const create = await call('POST', '/v1/sandboxes', { template: 'broken' })
    assert.equal(create.body.error.code, 'TEMPLATE_NOT_FOUND')
    assert.match(create.body.error.message, /no ready build/)
  })

  it('streams the log live over SSE, ends with the build, and resumes after Last-Event-ID', async () => {
    let release = () => {}
    agent.buildGate = new Promise((r) => {
      release = r
    })
    const r = await call('POST', '/v1/templates', { name: 'live', image: 'img:1' })
    const streamed = sse(`/v1/builds/${r.body.build.id}/logs`)
    setTimeout(release, 50)
    const events = await streamed
    const logs = events.filter((e) => e.event === 'log')
    assert.deepEqual(
      logs.map((e) => e.data.seq),
      logs.map((_, i) => i),
    )
    assert.ok(logs.length >= 4, JSON.stringify(events))
    assert.deepEqual(events.at(-1)?.event, 'end')
    assert.equal(events.at(-1)?.data.status, 'ready')
    const resumed = await sse(`/v1/builds/${r.body.build.id}/logs`, '1')
    assert.deepEqual(
      resumed.filter((e) => e.event === 'log').map((e) => e.data.seq),
      logs.slice(2).map((e) => e.data.seq),
    )
  })

  it('a Dockerfile build waits for its context; the upload is capped and only its owner may send it', async () => {
    const r = await call('POST', '/v1/templates', {
      name: 'df',
      dockerfile: 'FROM forkbox:base\nCOPY . /app',
      context: true,
    })
    assert.equal(r.body.build.status, 'waiting')
    const other = (await call('POST', '/v1/keys', { name: 'other' })).body.key
    assert.equal((await call('PUT', `/v1/builds/${r.body.build.id}/context`, new Uint8Array(10), other)).status, 404)
    const big = await call('PUT', `/v1/builds/${r.body.build.id}/context`, new Uint8Array(5000))
    assert.equal(big.body.error.code, 'PAYLOAD_TOO_LARGE')
    assert.equal((await call('GET', `/v1/builds/${r.body.build.id}`)).body.status, 'waiting')
    const up = await call('PUT', `/v1/builds/${r.body.build.id}/context`, new Uint8Array(1024))
    assert.equal(up.status, 202)
    assert.equal((await settled(r.body.build.id)).status, 'ready')
    const spec = [...agent.userTemplates.values()][0]
    assert.equal(spec?.source.kind, 'dockerfile')
    const again = await call('PUT', `/v1/builds/${r.body.build.id}/context`, new Uint8Array(10))
    assert.equal(again.body.error.code, 'TEMPLATE_CONFLICT')
  })

  it('an image archive build waits for its upload, which reaches the agent as the archive (then removed)', async () => {
    const r = await call('POST', '/v1/templates', { name: 'saved', archive: true })
    assert.equal(r.status, 202, JSON.stringify(r.body))
    assert.equal(r.body.build.status, 'waiting')
    const archive = new Uint8Array(2048).fill(7)
    assert.equal((await call('PUT', `/v1/builds/${r.body.build.id}/context`, archive)).status, 202)
    assert.equal((await settled(r.body.build.id)).status, 'ready')
    const built = agent.builds.at(-1)
    assert.equal(built?.spec.source.kind, 'archive')
    assert.deepEqual(built?.context, Buffer.from(archive))
    const path = built?.spec.source.kind === 'archive' ? built.spec.source.archiveTar : undefined
    assert.ok(path && !existsSync(path), 'the upload is removed once the build ends')
  })

  it('prune is for the admin key only and passes its layer cache size to the agent', async () => {
    const user = (await call('POST', '/v1/keys', { name: 'user' })).body.key
    const denied = await call('POST', '/v1/templates/prune', {}, user)
    assert.equal(denied.status, 403, JSON.stringify(denied.body))
    assert.deepEqual(agent.prunes, [])
    const r = await call('POST', '/v1/templates/prune', { layerCacheMB: 512 })
    assert.equal(r.status, 200, JSON.stringify(r.body))
    assert.deepEqual(r.body, { removed: ['built-0123456789abcdef'], freedBytes: 4096 })
    assert.deepEqual(agent.prunes, [{ layerCacheBytes: 512 * 1024 * 1024 }])
    assert.equal((await call('POST', '/v1/templates/prune', { layerCacheMB: -1 })).body.error.code, 'VALIDATION_FAILED')
  })

  it('after a restart an unfinished build is failed with a reason and ready ones are known to the agent again', async () => {
    const ready = await call('POST', '/v1/templates', { name: 'kept', image: 'img:1' })
    await settled(ready.body.build.id)
    const waiting = await call('POST', '/v1/templates', { name: 'cut', dockerfile: 'FROM scratch', context: true })
    await cp.close()
    await start()
    const cut = (await call('GET', `/v1/builds/${waiting.body.build.id}`)).body
    assert.deepEqual([cut.status, cut.error?.message], ['failed', 'the control plane restarted during the build'])
    assert.equal(agent.userTemplates.size, 1)
    assert.equal((await call('POST', '/v1/sandboxes', { template: 'kept' })).status, 201)
  })

  it('a deleted version stays with the agent while a sandbox runs from it, and goes after', async () => {
    const r = await call('POST', '/v1/templates', { name: 'busy', image: 'img:1' })
    await settled(r.body.build.id)
    const sbx = (await call('POST', '/v1/sandboxes', { template: 'busy' })).body
    assert.equal((await call('DELETE', '/v1/templates/busy')).status, 204)
    assert.equal(agent.userTemplates.size, 1, 'kept: the sandbox needs its rootfs')
    assert.equal((await call('DELETE', `/v1/sandboxes/${sbx.id}`)).status, 204)
    await cp.close()
    await start()
    assert.equal(agent.userTemplates.size, 0, 'removed at the next collection (here: the restart)')
  })

  it("a key's registry logins go to its builds only, sealed at rest and never returned", async () => {
    const put = await call('PUT', '/v1/registries/registry.local:5000', {
      username: 'alice',
      password: 'pw-0123456789',
    })
    assert.deepEqual([put.status, put.body.username, put.body.password], [200, 'alice', undefined])
    const inline = await call('POST', '/v1/templates', {
      name: 'hub',
      image: 'team/env:1',
      registryAuth: { username: 'bob', password: 'pw-hub-987654' },
    })
    await settled(inline.body.build.id)
    const mine = await call('POST', '/v1/templates', { name: 'private', image: 'registry.local:5000/team/env:1' })
    await settled(mine.body.build.id)
    assert.deepEqual(agent.buildAuth.at(-1), {
      'registry.local:5000': { username: 'alice', password: 'pw-0123456789' },
      'docker.io': { username: 'bob', password: 'pw-hub-987654' },
    })
    const listed = await call('GET', '/v1/registries')
    assert.deepEqual(
      listed.body.registries.map((r: { registry: string; username: string }) => [r.registry, r.username]),
      [
        ['docker.io', 'bob'],
        ['registry.local:5000', 'alice'],
      ],
    )
    assert.ok(!JSON.stringify(listed.body).includes('pw-'), 'no password comes back')
    const other = (await call('POST', '/v1/keys', { name: 'other' })).body.key
    const theirs = await call(
      'POST',
      '/v1/templates',
      { name: 'private', image: 'registry.local:5000/team/env:1' },
      other,
    )
    await settled(theirs.body.build.id, other)
    assert.deepEqual(agent.buildAuth.at(-1), {}, "another key's build gets none of them")
    await cp.close()
    const raw = ['db.sqlite', 'db.sqlite-wal']
      .filter((f) => existsSync(join(dir, f)))
      .map((f) => readFileSync(join(dir, f)).toString('latin1'))
      .join('')
    assert.ok(raw.includes('registry.local:5000'), 'the database file was read')
    assert.ok(!raw.includes('pw-0123456789') && !raw.includes('pw-hub-987654'), 'sealed at rest')
    await start()
    assert.equal((await call('DELETE', '/v1/registries/docker.io')).status, 204)
    assert.equal((await call('DELETE', '/v1/registries/docker.io')).status, 404)
  })

  it("a Dockerfile's FROM forkbox:NAME may name the key's own and public templates, never another key's private one", async () => {
    const other = (await call('POST', '/v1/keys', { name: 'other' })).body.key
    for (const [k, name] of [
      [key, 'mine'],
      [other, 'theirs'],
      [other, 'shared'],
    ] as const)
      await settled((await call('POST', '/v1/templates', { name, image: 'img:1' }, k)).body.build.id, k)
    const shared = (await call('GET', '/v1/templates/shared', undefined, other)).body
    await call('PUT', `/v1/templates/by-id/${shared.id}/public`, { public: true })
    const r = await call('POST', '/v1/templates', { name: 'df', dockerfile: 'FROM forkbox:mine' })
    await settled(r.body.build.id)
    const spec = [...agent.userTemplates.values()].at(-1)
    assert.ok(spec?.source.kind === 'dockerfile')
    assert.deepEqual(Object.keys(spec.source.templates ?? {}).sort(), ['mine', 'shared'])
  })

  it('delete removes every version from the agent; the name is free again', async () => {
    const r = await call('POST', '/v1/templates', { name: 'gone', image: 'img:1' })
    await settled(r.body.build.id)
    assert.equal((await call('DELETE', '/v1/templates/gone')).status, 204)
    assert.equal(agent.userTemplates.size, 0)
    assert.equal((await call('POST', '/v1/sandboxes', { template: 'gone' })).body.error.code, 'TEMPLATE_NOT_FOUND')
    assert.equal((await call('GET', '/v1/templates/gone')).status, 404)
    const again = await call('POST', '/v1/templates', { name: 'gone', image: 'img:2' })
    assert.equal(again.body.build.version, 1)
  })
})
