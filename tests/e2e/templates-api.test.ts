// Templates from a Dockerfile through the API on real runsc: the context uploaded as a tarball, the
// build logged step by step over SSE, baked with its server running; a create answers at
// getHost(port) at once. A rebuild starts at the changed step; bad builds fail clearly.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { Sandbox } from '@forkbox/sdk'
import { followBuild, sharedTemplatesDir, useTestHost } from './harness.ts'

const host = useTestHost()
const work = mkdtempSync(join(tmpdir(), 'forkbox-e2e-tpl-api-'))
after(() => rmSync(work, { recursive: true, force: true }))
const name = `app-${process.pid}`
/** The layer cache outlives a run: the changed step's text is this run's own. */
const nonce = `${process.pid}-${Date.now()}`

interface Build {
  id: string
  status: string
  version: number
  error: { code: string; message: string } | null
}

async function call(method: string, path: string, body?: unknown) {
  const { url, apiKey } = host().conn
  const headers: Record<string, string> = { authorization: `Bearer ${apiKey}` }
  let payload: BodyInit | undefined
  if (body instanceof Uint8Array) {
    headers['content-type'] = 'application/x-tar'
    payload = new Blob([new Uint8Array(body)])
  } else if (body !== undefined) {
    headers['content-type'] = 'application/json'
    payload = JSON.stringify(body)
  }
  const res = await fetch(`${url}${path}`, { method, headers, body: payload })
  return { status: res.status, body: await res.json().catch(() => null) }
}

/** A build context dir as a tarball (tar's own format, as `docker build` sends it). */
function tarOf(dir: string): Uint8Array {
  return execFileSync('tar', ['-C', dir, '-cf', '-', '.'], { maxBuffer: 64 * 1024 * 1024 })
}

/** Starts a build with its context, follows its log over SSE to the end; the log's lines and the build. */
async function build(dockerfile: string, context: Uint8Array, extra: Record<string, unknown> = {}) {
  const r = await call('POST', '/v1/templates', { name, dockerfile, context: true, ...extra })
  assert.equal(r.status, 202, JSON.stringify(r.body))
  const up = await call('PUT', `/v1/builds/${r.body.build.id}/context`, context)
  assert.equal(up.status, 202, JSON.stringify(up.body))
  const { url, apiKey } = host().conn
  return followBuild(url, apiKey, r.body.build.id)
}

const dockerfile = (last: string) => `# every instruction forkbox builds
ARG BASE=forkbox:base
FROM \${BASE} AS builder
ARG GREETING=hello
WORKDIR /src
COPY greeting.txt ./
RUN echo "$GREETING, $(cat greeting.txt)" > /src/page.html
FROM forkbox:base
ENV APP_HOME=/srv/app MODE=production
WORKDIR /srv/app
COPY --from=builder /src/page.html ./index.html
COPY --chown=user:user site/ ./site/
USER user
RUN echo "${last}" > /home/user/last.txt
EXPOSE 8080
HEALTHCHECK CMD python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8080/')"
CMD ["python3", "-m", "http.server", "8080"]
`

describe('templates from a Dockerfile through the API', () => {
  const context = join(work, 'context')
  mkdirSync(join(context, 'site'), { recursive: true })
  writeFileSync(join(context, 'greeting.txt'), 'world')
  writeFileSync(join(context, 'site/about.txt'), 'about forkbox\n')
  writeFileSync(join(context, 'secret.env'), 'TOKEN=nope\n')
  writeFileSync(join(context, '.dockerignore'), 'secret.env\n')

  it('builds, bakes its server running, and a create answers at getHost(port) with the image config', async () => {
    const { build: b, lines } = await build(dockerfile(`one ${nonce}`), tarOf(context), {
      buildArgs: { GREETING: 'hi' },
    })
    assert.equal(b.status, 'ready', `${JSON.stringify(b.error)}\n${lines.join('\n')}`)
    assert.ok(
      lines.some((l) => /^#\d+ RUN echo "\$GREETING/.test(l)),
      lines.join('\n'),
    )
    await using sbx = await Sandbox.create({ ...host().conn, template: name })
    // EXPOSE made 8080 the default exposed port; the server was baked running
    const res = await fetch(`http://${sbx.getHost(8080)}/index.html`, { headers: { 'x-api-key': host().conn.apiKey } })
    assert.equal(res.status, 200)
    assert.equal(await res.text(), 'hi, world\n')
    const who = await sbx.exec('echo "$(id -un) $(pwd) $APP_HOME $MODE"; cat site/about.txt; ls -a /srv/app')
    assert.equal(who.exitCode, 0, who.stderr)
    assert.match(who.stdout, /^user \/srv\/app \/srv\/app production\nabout forkbox\n/)
    assert.doesNotMatch(who.stdout, /secret/, '.dockerignore held the secret back')
    assert.equal((await sbx.exec(['stat', '-c', '%U', '/srv/app/site/about.txt'])).stdout, 'user\n')
  })

  it('a rebuild with only the last step changed reuses every earlier layer', async () => {
    const { build: b, lines } = await build(dockerfile(`two ${nonce}`), tarOf(context), {
      buildArgs: { GREETING: 'hi' },
    })
    assert.equal(b.status, 'ready', lines.join('\n'))
    assert.equal(b.version, 2)
    const steps = lines.filter((l) => /^#\d+ [A-Z]+ /.test(l))
    const ran = steps.filter((l) => !l.endsWith('(cached)'))
    assert.deepEqual(
      ran.map((l) => l.replace(/^#\d+ /, '')),
      [`RUN echo "two ${nonce}" > /home/user/last.txt`],
      steps.join('\n'),
    )
    await using sbx = await Sandbox.create({ ...host().conn, template: name })
    assert.equal((await sbx.exec(['cat', '/home/user/last.txt'])).stdout, `two ${nonce}\n`)
    await using old = await Sandbox.create({ ...host().conn, template: `${name}@1` })
    assert.equal((await old.exec(['cat', '/home/user/last.txt'])).stdout, `one ${nonce}\n`)
  })

  it('a start command that fails before it is ready is started again; one that keeps failing fails the build with what it printed; one that exits 0 handed over to a daemon', async () => {
    /** Builds `dockerfile` as template `name-suffix`: it bakes, and a sandbox of it serves on 8080. */
    const servesOn8080 = async (suffix: string, dockerfile: string) => {
      const b = await build(dockerfile, tarOf(context), { name: `${name}-${suffix}` })
      assert.equal(b.build.status, 'ready', `${JSON.stringify(b.build.error)}\n${b.lines.join('\n')}`)
      await using sbx = await Sandbox.create({ ...host().conn, template: `${name}-${suffix}` })
      const res = await fetch(`http://${sbx.getHost(8080)}/`, { headers: { 'x-api-key': host().conn.apiKey } })
      assert.equal(res.status, 200)
    }
    // the first start finds "its stale pid file" and exits, as a server does after a reboot; the second serves
    await servesOn8080(
      'flaky',
      `FROM forkbox:base
USER user
EXPOSE 8080
CMD ["sh", "-c", "if [ -e /tmp/started-once ]; then exec python3 -m http.server 8080; fi; touch /tmp/started-once; echo stale pid file >&2; exit 3"]
`,
    )
    // one that exits 0 at once has handed over to a daemon (`service x start`): its readiness is waited for
    await servesOn8080(
      'daemon',
      'FROM forkbox:base\nEXPOSE 8080\nCMD ["sh", "-c", "setsid sh -c \'sleep 1; exec python3 -m http.server 8080\' >/dev/null 2>&1 </dev/null & exit 0"]\n',
    )
    // one that never starts: the build fails on its output within seconds, not after the ready timeout
    const started = performance.now()
    const broken = await build(
      'FROM forkbox:base\nEXPOSE 8080\nCMD ["sh", "-c", "echo cannot bind 8080 >&2; exit 4"]\n',
      tarOf(context),
      { name: `${name}-broken` },
    )
    assert.equal(broken.build.status, 'failed')
    assert.equal(broken.build.error?.code, 'BUILD_STEP_FAILED', JSON.stringify(broken.build.error))
    assert.match(
      broken.build.error?.message ?? '',
      /\(3 tries\): it exited with code 4 before it was ready: cannot bind 8080/,
    )
    assert.ok(performance.now() - started < 60_000, `${performance.now() - started} ms`)
  })

  it('a failing RUN, an unsupported instruction and an escaping context each fail the build clearly', async () => {
    const failing = await build('FROM forkbox:base\nRUN echo first\nRUN echo "to stderr" >&2; exit 3\n', tarOf(context))
    assert.equal(failing.build.status, 'failed')
    assert.equal(failing.build.error?.code, 'BUILD_STEP_FAILED', JSON.stringify(failing.build.error))
    assert.match(failing.build.error?.message ?? '', /exit(ed)? (code )?3|exit 3/)
    assert.ok(failing.lines.includes('to stderr'), failing.lines.join('\n'))
    const unsupported = await build('FROM forkbox:base\nRUN true\nVOLUME /data\n', tarOf(context))
    assert.equal(unsupported.build.status, 'failed')
    assert.match(unsupported.build.error?.message ?? '', /line 3/)
    assert.ok(!unsupported.lines.some((l) => /^#\d+ RUN/.test(l)), 'nothing ran')
    const evil = join(work, 'evil')
    mkdirSync(evil, { recursive: true })
    symlinkSync('/etc', join(evil, 'etc-link'))
    const escaping = await build('FROM forkbox:base\nCOPY etc-link/passwd /x\n', tarOf(evil))
    assert.equal(escaping.build.status, 'failed')
    assert.equal(escaping.build.error?.code, 'INVALID_PATH', JSON.stringify(escaping.build.error))
    // a 2 GB context is refused from its length, before a byte of it is read
    const waiting = await call('POST', '/v1/templates', {
      name: `${name}-big`,
      dockerfile: 'FROM forkbox:base',
      context: true,
    })
    const big = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const { url: base, apiKey } = host().conn
      const req = request(`${base}/v1/builds/${waiting.body.build.id}/context`, {
        method: 'PUT',
        headers: {
          authorization: `Bearer ${apiKey}`,
          'content-type': 'application/x-tar',
          'content-length': 2 * 1024 ** 3,
        },
      })
      req.on('response', (res) => {
        let body = ''
        res.on('data', (d) => (body += d))
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, body })
          req.destroy()
        })
      })
      req.on('error', reject)
      req.write(Buffer.alloc(64 * 1024))
    })
    assert.equal(big.status, 413, big.body)
    assert.match(big.body, /PAYLOAD_TOO_LARGE/)
    // the host and its templates carry on
    await using sbx = await Sandbox.create({ ...host().conn, template: name })
    assert.equal((await sbx.exec(['cat', 'index.html'])).stdout, 'hi, world\n')
    assert.ok(readFileSync('/etc/hostname', 'utf8').length > 0)
  })

  it("FROM forkbox:NAME builds on the key's own template; another key can reach it neither by name nor by the agent's name", async () => {
    const mine = await build(
      `FROM forkbox:${name}\nRUN cat /srv/app/index.html > /home/user/copied.txt\n`,
      tarOf(context),
    )
    assert.equal(mine.build.status, 'ready', mine.lines.join('\n'))
    const t = (await call('GET', `/v1/templates/${name}`)).body
    const agentName = `u-${t.id.replace('tpl-', '')}-${t.version}`
    const { url, apiKey } = host().conn
    const other = (
      await (
        await fetch(`${url}/v1/keys`, {
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'other' }),
        })
      ).json()
    ).key as string
    for (const from of [name, agentName]) {
      const r = await fetch(`${url}/v1/templates`, {
        method: 'POST',
        headers: { authorization: `Bearer ${other}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'thief', dockerfile: `FROM forkbox:${from}\nRUN true\n` }),
      })
      const { build: b } = (await r.json()) as { build: Build }
      let status = b
      for (let i = 0; i < 100 && status.status !== 'failed' && status.status !== 'ready'; i++) {
        await new Promise((res) => setTimeout(res, 100))
        status = (await (
          await fetch(`${url}/v1/builds/${b.id}`, { headers: { authorization: `Bearer ${other}` } })
        ).json()) as Build
      }
      assert.equal(status.error?.code, 'TEMPLATE_NOT_FOUND', `${from}: ${JSON.stringify(status)}`)
    }
  })

  it('deleting the template removes its versions from the templates dir once no sandbox uses them', async () => {
    const agentNames = (await call('GET', `/v1/templates/${name}`)).body.builds.map(
      (b: { templateId: string; version: number }) => `u-${b.templateId.replace('tpl-', '')}-${b.version}-`,
    )
    assert.equal((await call('DELETE', `/v1/templates/${name}`)).status, 204)
    const left = readdirSync(sharedTemplatesDir).filter((n) => agentNames.some((a: string) => n.startsWith(a)))
    assert.deepEqual(left, [])
  })
})
