import assert from 'node:assert/strict'
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import type { StartHostOptions } from '../src/index.ts'
import { execResult, harness, json, type SeenRequest, sandbox } from './harness.ts'

const b64 = (s: string | Uint8Array) => Buffer.from(s).toString('base64')
const noContent = () => new Response(null, { status: 204 })
const lines = (reqs: SeenRequest[]) => reqs.map((r) => `${r.method} ${r.url.pathname}`)

describe('forkbox run', () => {
  it("creates, execs, mirrors raw output, kills, and exits with the command's code", async () => {
    const h = harness((req) => {
      if (req.method === 'DELETE') return noContent()
      if (req.url.pathname.endsWith('/exec')) {
        return json(200, execResult({ exitCode: 3, stdout: b64(new Uint8Array([0xff, 0x0a])), stderr: b64('warn\n') }))
      }
      return json(201, sandbox())
    })
    const code = await h.run(
      'run',
      '-t',
      'python',
      '--timeout',
      '5',
      '-e',
      'A=1',
      '-e',
      'B=2',
      '--',
      'echo',
      '-n',
      'hi',
    )
    assert.equal(code, 3)
    assert.deepEqual(h.stdoutBytes(), new Uint8Array([0xff, 0x0a]))
    assert.equal(h.stderr(), 'warn\n')
    assert.deepEqual(lines(h.requests), [
      'POST /v1/sandboxes',
      'POST /v1/sandboxes/sbx_1/exec',
      'DELETE /v1/sandboxes/sbx_1',
    ])
    assert.deepEqual(JSON.parse(h.requests[0]?.body ?? ''), { template: 'python', ttlSeconds: 300 })
    assert.deepEqual(JSON.parse(h.requests[1]?.body ?? ''), {
      cmd: ['echo', '-n', 'hi'],
      env: { A: '1', B: '2' },
      timeoutSeconds: 5,
      encoding: 'base64',
    })
  })

  it('sends one word as a shell string and stdin when asked', async () => {
    const h = harness((req) =>
      req.method === 'DELETE'
        ? noContent()
        : req.url.pathname.endsWith('/exec')
          ? json(200, execResult())
          : json(201, sandbox()),
    )
    assert.equal(await h.run('run', '-i', '--', 'cat | wc -c'), 0)
    const body = JSON.parse(h.requests[1]?.body ?? '')
    assert.equal(body.cmd, 'cat | wc -c')
    assert.equal(body.stdin, b64('from stdin'))
    assert.equal(body.stdinEncoding, 'base64')
  })

  it('still kills the sandbox when exec fails, and prints CODE: message', async () => {
    const h = harness((req) => {
      if (req.method === 'DELETE') return noContent()
      if (req.url.pathname.endsWith('/exec')) {
        return json(410, { error: { code: 'SANDBOX_ERRORED', message: 'sandbox ran out of memory', requestId: 'r1' } })
      }
      return json(201, sandbox())
    })
    assert.equal(await h.run('run', 'true'), 1)
    assert.equal(h.stderr(), 'forkbox: SANDBOX_ERRORED: sandbox ran out of memory\n')
    assert.equal(h.requests.at(-1)?.method, 'DELETE')
  })

  it('on Ctrl-C aborts the exec, kills the sandbox and exits 130', async () => {
    const h = harness((req) => {
      if (req.method === 'DELETE') return noContent()
      if (req.url.pathname.endsWith('/exec')) {
        queueMicrotask(() => h.interrupt())
        return new Promise<Response>(() => {})
      }
      return json(201, sandbox())
    })
    assert.equal(await h.run('run', 'sleep', '100'), 130)
    assert.equal(h.requests.at(-1)?.method, 'DELETE')
  })

  it('reports usage errors without touching the network', async () => {
    const h = harness(() => json(500, {}))
    assert.equal(await h.run('run', 'ls', '-la'), 1)
    assert.match(h.stderr(), /^forkbox: USAGE: unknown option '-la' \(put the sandbox command after --\)\n$/)
    assert.equal(await h.run('run', '--timeout', 'soon', 'ls'), 1)
    assert.match(h.stderr(), /forkbox: USAGE: .*positive number of seconds/)
    assert.equal(h.requests.length, 0)
  })
})

describe('forkbox exec', () => {
  it('connects and passes cwd, env and timeout', async () => {
    const h = harness((req) =>
      req.method === 'GET' ? json(200, sandbox({ id: 'sbx_9' })) : json(200, execResult({ stdout: b64('ok\n') })),
    )
    const code = await h.run('exec', 'sbx_9', '--cwd', '/tmp', '--env', 'K=V', '--timeout', '2.5', '--', 'ls', '-la')
    assert.equal(code, 0)
    assert.equal(h.stdout(), 'ok\n')
    assert.deepEqual(lines(h.requests), ['GET /v1/sandboxes/sbx_9', 'POST /v1/sandboxes/sbx_9/exec'])
    assert.deepEqual(JSON.parse(h.requests[1]?.body ?? ''), {
      cmd: ['ls', '-la'],
      cwd: '/tmp',
      env: { K: 'V' },
      timeoutSeconds: 2.5,
      encoding: 'base64',
    })
  })

  it('notes a timeout on stderr', async () => {
    const h = harness((req) =>
      req.method === 'GET' ? json(200, sandbox()) : json(200, execResult({ exitCode: 137, timedOut: true })),
    )
    assert.equal(await h.run('exec', 'sbx_1', '--timeout', '1', 'sleep 5'), 137)
    assert.equal(h.stderr(), 'forkbox: command timed out after 1s\n')
  })

  it('prints a not-found error', async () => {
    const h = harness(() =>
      json(404, { error: { code: 'SANDBOX_NOT_FOUND', message: 'no sandbox nope', requestId: 'r' } }),
    )
    assert.equal(await h.run('exec', 'nope', 'true'), 1)
    assert.equal(h.stderr(), 'forkbox: SANDBOX_NOT_FOUND: no sandbox nope\n')
  })
})

describe('forkbox ls', () => {
  const list = [
    sandbox({ metadata: { user: 'a', job: '7' } }),
    sandbox({ id: 'sbx_2', state: 'errored', errorReason: 'out_of_memory', endedAt: 'x' }),
  ]

  it('prints a table of running sandboxes by default', async () => {
    const h = harness(() => json(200, { sandboxes: list }))
    assert.equal(await h.run('ls'), 0)
    assert.equal(h.requests[0]?.url.search, '?state=running')
    assert.equal(
      h.stdout(),
      [
        'ID     TEMPLATE  STATE                    CREATED  EXPIRES  METADATA',
        'sbx_1  base      running                  1m ago   in 4m    user=a,job=7',
        'sbx_2  base      errored (out_of_memory)  1m ago   -',
        '',
      ].join('\n'),
    )
  })

  it('--all drops the state filter, -m filters by metadata, --json prints JSON', async () => {
    const h = harness(() => json(200, { sandboxes: list }))
    assert.equal(await h.run('ls', '--all', '--json', '-m', 'user=a'), 0)
    assert.equal(h.requests[0]?.url.search, '?metadata.user=a')
    assert.deepEqual(JSON.parse(h.stdout()), list)
  })
})

describe('forkbox kill', () => {
  it('kills each id and keeps going after a failure', async () => {
    const h = harness((req) =>
      req.url.pathname.endsWith('/bad')
        ? json(404, { error: { code: 'SANDBOX_NOT_FOUND', message: 'no sandbox bad', requestId: 'r' } })
        : noContent(),
    )
    assert.equal(await h.run('kill', 'sbx_1', 'bad', 'sbx_2'), 1)
    assert.equal(h.stdout(), 'sbx_1\nsbx_2\n')
    assert.equal(h.stderr(), 'forkbox: SANDBOX_NOT_FOUND: no sandbox bad\n')
  })
})

describe('forkbox keys', () => {
  const info = { id: 'key_1', name: 'ci', prefix: 'fbx_ab', createdAt: '2025-01-01T00:00:00Z', revokedAt: null }

  it('create prints only the secret on stdout', async () => {
    const h = harness(() => json(201, { ...info, key: 'fbx_secret' }))
    assert.equal(await h.run('keys', 'create', 'ci'), 0)
    assert.equal(h.stdout(), 'fbx_secret\n')
    assert.match(h.stderr(), /created key key_1/)
    assert.deepEqual(JSON.parse(h.requests[0]?.body ?? ''), { name: 'ci' })
  })

  it('list and revoke', async () => {
    const h = harness((req) => (req.method === 'DELETE' ? noContent() : json(200, { keys: [info] })))
    assert.equal(await h.run('keys', 'list'), 0)
    assert.equal(h.stdout(), 'ID     NAME  PREFIX  CREATED  REVOKED\nkey_1  ci    fbx_ab  1m ago   -\n')
    assert.equal(await h.run('keys', 'revoke', 'key_1'), 0)
    assert.deepEqual(lines(h.requests), ['GET /v1/keys', 'DELETE /v1/keys/key_1'])
  })

  it("a non-admin key gets the server's error", async () => {
    const h = harness(() => json(403, { error: { code: 'FORBIDDEN', message: 'admin key required', requestId: 'r' } }))
    assert.equal(await h.run('keys', 'list'), 1)
    assert.equal(h.stderr(), 'forkbox: FORBIDDEN: admin key required\n')
  })
})

describe('forkbox up', () => {
  async function waitFor(check: () => boolean): Promise<void> {
    for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 5))
    assert.ok(check(), 'condition never became true')
  }

  function fakeHost(bootstrapKey: string | null) {
    const state = { options: undefined as StartHostOptions | undefined, closed: false }
    const host = {
      startHost: async (options?: StartHostOptions) => {
        state.options = options
        options?.onTemplateProgress?.({ template: 'base', phase: 'debootstrap', fraction: 0.05 })
        options?.onTemplateProgress?.({ template: 'base', phase: 'debootstrap', fraction: 0.07 })
        options?.onTemplateProgress?.({ template: 'base', phase: 'debootstrap', fraction: 0.5, message: 'unpacking' })
        options?.onTemplateProgress?.({ template: 'base', phase: 'snapshot' })
        return {
          url: 'http://127.0.0.1:9000',
          bootstrapKey,
          close: async () => {
            state.closed = true
          },
        }
      },
    }
    return { host, state }
  }

  it('shows progress, prints url and key, writes credentials, and closes on a signal', async () => {
    const { host, state } = fakeHost('fbx_boot')
    const h = harness(() => json(500, {}), { loadHost: async () => host })
    const done = h.run('up', '--port', '9000', '--host', '0.0.0.0')
    await waitFor(() => h.stdout().includes('press Ctrl-C'))
    assert.equal(state.options?.port, 9000)
    assert.equal(state.options?.host, '0.0.0.0')
    assert.equal(
      h.stderr(),
      [
        'template base: debootstrap 5%',
        'template base: debootstrap 50% - unpacking',
        'template base: snapshot',
        '',
      ].join('\n'),
    )
    assert.match(h.stdout(), /forkbox is up at http:\/\/127\.0\.0\.1:9000\nadmin API key: fbx_boot\n/)
    const path = join(h.configDir, 'forkbox', 'credentials.json')
    assert.deepEqual(JSON.parse(readFileSync(path, 'utf8')), { url: 'http://127.0.0.1:9000', apiKey: 'fbx_boot' })
    assert.equal(statSync(path).mode & 0o777, 0o600)
    assert.equal(state.closed, false)
    h.interrupt()
    assert.equal(await done, 0)
    assert.equal(state.closed, true)
  })

  it('keeps the stored key when no new bootstrap key was made, but updates the url', async () => {
    const { host } = fakeHost(null)
    const h = harness(() => json(500, {}), { loadHost: async () => host })
    const path = join(h.configDir, 'forkbox', 'credentials.json')
    mkdirSync(join(h.configDir, 'forkbox'), { recursive: true })
    writeFileSync(path, JSON.stringify({ url: 'http://old:1', apiKey: 'fbx_kept' }))
    const done = h.run('up')
    await waitFor(() => h.stdout().includes('press Ctrl-C'))
    assert.doesNotMatch(h.stdout(), /API key/)
    assert.deepEqual(JSON.parse(readFileSync(path, 'utf8')), { url: 'http://127.0.0.1:9000', apiKey: 'fbx_kept' })
    h.interrupt()
    assert.equal(await done, 0)
  })

  it('does not print the admin key when stdout is not a terminal (it would land in a log file)', async () => {
    const { host } = fakeHost('fbx_boot_secret')
    const h = harness(() => json(500, {}), { loadHost: async () => host, stdoutIsTerminal: false })
    const done = h.run('up')
    await waitFor(() => h.stdout().includes('press Ctrl-C'))
    assert.doesNotMatch(h.stdout() + h.stderr(), /fbx_boot_secret/)
    assert.match(h.stdout(), /admin API key: saved to .*credentials\.json/)
    const path = join(h.configDir, 'forkbox', 'credentials.json')
    assert.equal(JSON.parse(readFileSync(path, 'utf8')).apiKey, 'fbx_boot_secret')
    h.interrupt()
    assert.equal(await done, 0)
  })

  it('reports a host that fails to start', async () => {
    const h = harness(() => json(500, {}), {
      loadHost: async () => ({
        startHost: () => Promise.reject(Object.assign(new Error('listen EADDRINUSE'), { code: 'EADDRINUSE' })),
      }),
    })
    assert.equal(await h.run('up'), 1)
    assert.equal(h.stderr(), 'forkbox: EADDRINUSE: listen EADDRINUSE\n')
  })
})

describe('forkbox snapshot and fork', () => {
  const sbx = (id: string) => sandbox({ id })

  it('snapshot prints the snapshot id', async () => {
    const h = harness((req) =>
      req.method === 'GET'
        ? json(200, sbx('sbx-1'))
        : json(201, {
            id: 'snap-1',
            sandboxId: 'sbx-1',
            template: 'base',
            resources: sbx('x').resources,
            sizeBytes: 9,
            createdAt: 'now',
          }),
    )
    assert.equal(await h.run('snapshot', 'sbx-1'), 0)
    assert.equal(h.stdout(), 'snap-1\n')
    assert.deepEqual(lines(h.requests), ['GET /v1/sandboxes/sbx-1', 'POST /v1/sandboxes/sbx-1/snapshots'])
  })

  it('fork asks for the count and prints one id a line', async () => {
    const h = harness((req) =>
      req.method === 'GET' ? json(200, sbx('sbx-1')) : json(201, { sandboxes: [sbx('sbx-2'), sbx('sbx-3')] }),
    )
    assert.equal(await h.run('fork', 'sbx-1', '--count', '2'), 0)
    assert.equal(h.stdout(), 'sbx-2\nsbx-3\n')
    assert.deepEqual(JSON.parse(h.requests[1]?.body ?? ''), { count: 2 })
    assert.equal(await h.run('fork', 'sbx-1', '--count', '0'), 1)
  })
})
