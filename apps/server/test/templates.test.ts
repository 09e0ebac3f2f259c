// Templates users build, through the HTTP app over a fake agent: builds and their versions,
// ownership and publishing, logs polled and streamed (resumable), context uploads, restarts.
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, it } from 'node:test'
import { AppError } from '@forkbox/protocol'
import { type ControlPlane, createControlPlane } from '../src/index.ts'
import { agentName } from '../src/store/templates.ts'
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
  it('a create looks its template up once: a built Dockerfile from its record, an image and a built-in from the agent', async () => {
    const built = await call('POST', '/v1/templates', { name: 'df-once', dockerfile: 'FROM forkbox:base' })
    await settled(built.body.build.id)
    const image = await call('POST', '/v1/templates', { name: 'img-once', image: 'registry.local/team/env:1' })
    await settled(image.body.build.id)
    const lists = async (template: string) => {
      const before = agent.templateLists
      const r = await call('POST', '/v1/sandboxes', { template })
      assert.equal(r.status, 201, JSON.stringify(r.body))
      return agent.templateLists - before
    }
    assert.equal(await lists('df-once'), 0, "a built Dockerfile's record says it all")
    assert.equal(await lists('img-once'), 1, "an image's EXPOSE is the agent's to read")
    assert.equal(await lists('base'), 1)
  })

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

describe('publishing approves a version', () => {
  /** Two tenants (plain keys) and the admin (the bootstrap key). */
  async function tenants() {
    const a = (await call('POST', '/v1/keys', { name: 'tenant-a' })).body.key as string
    const b = (await call('POST', '/v1/keys', { name: 'tenant-b' })).body.key as string
    return { a, b }
  }
  async function built(name: string, image: string, k: string) {
    const r = await call('POST', '/v1/templates', { name, image }, k)
    assert.equal(r.status, 202, JSON.stringify(r.body))
    assert.equal((await settled(r.body.build.id, k)).status, 'ready')
    return r.body as { template: { id: string }; build: { id: string; version: number } }
  }
  const publish = (id: string, body: Record<string, unknown> = { public: true }, k = key) =>
    call('PUT', `/v1/templates/by-id/${id}/public`, body, k)
  /** The agent name a create from `template` by key `k` started (or the error code it met). */
  async function startedFrom(template: string, k: string): Promise<string> {
    const r = await call('POST', '/v1/sandboxes', { template }, k)
    if (r.status !== 201) return r.body.error.code
    return agent.started.at(-1)?.template as string
  }

  it("the owner's rebuild of a public template stays its own; other keys get the published build until the admin publishes again", async () => {
    const { a, b } = await tenants()
    const v1 = await built('tool', 'img:1', a)
    const id = v1.template.id
    const published = await publish(id)
    assert.equal(published.status, 200, JSON.stringify(published.body))
    assert.deepEqual([published.body.public, published.body.publishedVersion], [true, 1])
    await built('tool', 'img:2', a)
    const [n1, n2] = [agentName(id, 1), agentName(id, 2)]

    // the owner gets its newest; every other key (the admin too) the approved build only
    assert.equal(await startedFrom('tool', a), n2)
    assert.equal(await startedFrom('tool', b), n1)
    assert.equal(await startedFrom('tool', key), n1)
    assert.equal(await startedFrom('tool@1', b), n1)
    assert.equal(await startedFrom('tool@2', b), 'TEMPLATE_NOT_FOUND')
    // listing and get show the others the published version
    const listed = (await call('GET', '/v1/templates', undefined, b)).body.templates
    assert.equal(listed.find((t: { name: string }) => t.name === 'tool')?.version, 1)
    const theirs = (await call('GET', '/v1/templates/tool', undefined, b)).body
    assert.deepEqual([theirs.version, theirs.publishedVersion, theirs.builds], [1, 1, []])
    const own = (await call('GET', '/v1/templates/tool', undefined, a)).body
    assert.deepEqual([own.version, own.publishedVersion, own.builds.length], [2, 1, 2])
    // FROM forkbox:tool in another key's build starts from the published build
    const df = await call('POST', '/v1/templates', { name: 'child', dockerfile: 'FROM forkbox:tool' }, b)
    await settled(df.body.build.id, b)
    const spec = agent.builds.at(-1)?.spec
    assert.ok(spec?.source.kind === 'dockerfile')
    assert.equal(spec.source.templates?.tool, n1)
    // ... the owner's from its newest
    const mine = await call('POST', '/v1/templates', { name: 'mine', dockerfile: 'FROM forkbox:tool' }, a)
    await settled(mine.body.build.id, a)
    const ownSpec = agent.builds.at(-1)?.spec
    assert.ok(ownSpec?.source.kind === 'dockerfile')
    assert.equal(ownSpec.source.templates?.tool, n2)

    // published again: the newest ready build is approved
    assert.equal((await publish(id)).body.publishedVersion, 2)
    assert.equal(await startedFrom('tool', b), n2)
    // or a version the admin names
    assert.equal((await publish(id, { public: true, version: 1 })).body.publishedVersion, 1)
    assert.equal(await startedFrom('tool', b), n1)
    assert.equal((await publish(id, { public: true, version: 7 })).body.error.code, 'TEMPLATE_NOT_FOUND')
    // unpublished: private again, for every version
    const un = await publish(id, { public: false })
    assert.deepEqual([un.body.public, un.body.publishedVersion], [false, null])
    assert.equal(await startedFrom('tool', b), 'TEMPLATE_NOT_FOUND')
    assert.equal(await startedFrom('tool@1', b), 'TEMPLATE_NOT_FOUND')
    assert.equal((await call('GET', '/v1/templates/tool', undefined, b)).status, 404)
  })

  it('a template with no ready build cannot be published; a failed rebuild changes nothing for others', async () => {
    const { a, b } = await tenants()
    const waiting = await call('POST', '/v1/templates', { name: 'later', dockerfile: 'FROM scratch', context: true }, a)
    const refused = await publish(waiting.body.template.id)
    assert.equal(refused.body.error.code, 'TEMPLATE_CONFLICT')
    assert.equal(await startedFrom('later', b), 'TEMPLATE_NOT_FOUND')
    const v1 = await built('steady', 'img:1', a)
    await publish(v1.template.id)
    agent.buildError = new AppError('IMAGE_NOT_FOUND', 'gone')
    const bad = await call('POST', '/v1/templates', { name: 'steady', image: 'img:nope' }, a)
    await settled(bad.body.build.id, a)
    assert.equal(await startedFrom('steady', b), agentName(v1.template.id, 1))
  })

  it("a public template's builds and build logs are its owner's and the admin's only", async () => {
    const { a, b } = await tenants()
    const v1 = await built('logged', 'img:1', a)
    await publish(v1.template.id)
    const id = v1.build.id
    const status = async (path: string, k: string) => {
      const res = await cp.app.request(path, { headers: { authorization: `Bearer ${k}` } })
      await res.body?.cancel()
      return res.status
    }
    for (const path of [`/v1/builds/${id}`, `/v1/builds/${id}/logs`]) {
      assert.equal(await status(path, b), 404, path)
      assert.equal(await status(path, a), 200, path)
      assert.equal(await status(path, key), 200, `${path} (admin)`)
    }
    assert.deepEqual((await call('GET', '/v1/templates/logged', undefined, b)).body.builds, [])
    assert.equal((await call('GET', '/v1/templates/logged', undefined, key)).body.builds.length, 1)
    // the context of a waiting build is its owner's to send: not the admin's either
    const w = await call('POST', '/v1/templates', { name: 'logged', dockerfile: 'FROM scratch', context: true }, a)
    assert.equal((await call('PUT', `/v1/builds/${w.body.build.id}/context`, new Uint8Array(10), key)).status, 404)
  })
})

describe("a key's scopes in its template builds", () => {
  it('a templates scope: only the names it lists are built, and a Dockerfile starts only from them', async () => {
    const r = await call('POST', '/v1/keys', { name: 'scoped', scopes: { templates: ['app', 'tools'] } })
    assert.equal(r.status, 201, JSON.stringify(r.body))
    const scoped = r.body.key as string
    const refused = async (body: Record<string, unknown>) => {
      const res = await call('POST', '/v1/templates', body, scoped)
      assert.equal(res.status, 403, JSON.stringify(body))
      assert.deepEqual([res.body.error.code, res.body.error.details], ['FORBIDDEN', { scope: 'templates' }])
      return res.body.error.message as string
    }
    assert.match(await refused({ name: 'other', image: 'img:1' }), /only build the templates app, tools, not other/)
    assert.match(await refused({ name: 'app', dockerfile: 'FROM forkbox:base' }), /FROM forkbox:base/)
    for (const dockerfile of [
      'from  "forkbox:base"',
      'FROM \\\n  forkbox:base AS b',
      'FROM forkbox:tools\nCOPY --from=forkbox:base /etc/hostname /x',
      'ARG B=forkbox:base\nFROM $B',
      'FROM forkbox:tools\nCOPY --from=$X /a /b',
    ])
      await refused({ name: 'app', dockerfile })
    // another key's public template it does not list is not reachable either
    const shared = await call('POST', '/v1/templates', { name: 'shared', image: 'img:1' })
    await settled(shared.body.build.id)
    await call('PUT', `/v1/templates/by-id/${shared.body.template.id}/public`, { public: true })
    await refused({ name: 'app', dockerfile: 'FROM forkbox:shared' })
    // what it lists builds: images from registries, and FROM its own listed templates
    const tools = await call('POST', '/v1/templates', { name: 'tools', image: 'img:1' }, scoped)
    assert.equal(tools.status, 202, JSON.stringify(tools.body))
    await settled(tools.body.build.id, scoped)
    const app = await call(
      'POST',
      '/v1/templates',
      { name: 'app', dockerfile: 'FROM forkbox:tools\nRUN echo $HOME\nFROM python:3\nCOPY --from=0 /a /b' },
      scoped,
    )
    assert.equal(app.status, 202, JSON.stringify(app.body))
    await settled(app.body.build.id, scoped)
    const spec = agent.builds.at(-1)?.spec
    assert.ok(spec?.source.kind === 'dockerfile')
    assert.deepEqual(Object.keys(spec.source.templates ?? {}), ['tools'])
  })

  it("a noNetwork key's builds run their steps with no network; other keys' builds keep theirs", async () => {
    const offline = (await call('POST', '/v1/keys', { name: 'offline', scopes: { noNetwork: true } })).body.key
    for (const body of [
      { name: 'off-img', image: 'registry.local/x:1' },
      { name: 'off-df', dockerfile: 'FROM python:3\nRUN pip install requests' },
    ]) {
      const r = await call('POST', '/v1/templates', body, offline)
      assert.equal(r.status, 202, JSON.stringify(r.body))
      await settled(r.body.build.id, offline)
      assert.equal(agent.builds.at(-1)?.spec.buildNetwork, 'none', body.name)
    }
    const r = await call('POST', '/v1/templates', { name: 'on-df', dockerfile: 'FROM python:3' })
    await settled(r.body.build.id)
    assert.equal(agent.builds.at(-1)?.spec.buildNetwork, undefined)
  })
})
