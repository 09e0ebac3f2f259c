import assert from 'node:assert/strict'
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { AppError } from '@forkbox/protocol'
import { Sandbox } from '@forkbox/sdk'
import type { StartHostOptions } from '../src/index.ts'
import { type Harness, type SeenRequest, useHarness } from './harness.ts'

const harness = useHarness()
const lines = (reqs: SeenRequest[]) => reqs.map((r) => `${r.method} ${r.url.pathname}`)
const body = (req: SeenRequest | undefined) => JSON.parse(new TextDecoder().decode(req?.body))

/** A sandbox made beforehand through the SDK; the requests that made it are forgotten. */
async function existing(h: Harness, options: Parameters<typeof Sandbox.create>[0] = {}): Promise<string> {
  const sbx = await Sandbox.create({ ...h.server.conn(), ...options })
  h.requests.length = 0
  return sbx.id
}

describe('forkbox run', () => {
  it("creates, execs, mirrors raw output, kills, and exits with the command's code", async () => {
    const h = harness()
    h.server.agent.nextExec = { exitCode: 3, stdout: Buffer.from([0xff, 0x0a]), stderr: Buffer.from('warn\n') }
    const code = await h.run('run', '-t', 'base', '--timeout', '5', '-e', 'A=1', '-e', 'B=2', '--', 'echo', '-n', 'hi')
    assert.equal(code, 3)
    assert.deepEqual(h.stdoutBytes(), new Uint8Array([0xff, 0x0a]))
    assert.equal(h.stderr(), 'warn\n')
    const id = h.server.agent.started[0]?.id
    assert.deepEqual(lines(h.requests), [
      'POST /v1/sandboxes',
      `POST /v1/sandboxes/${id}/exec`,
      `DELETE /v1/sandboxes/${id}`,
    ])
    assert.deepEqual(h.server.agent.stopped, [id])
    assert.deepEqual(body(h.requests[0]), { template: 'base', ttlSeconds: 300 })
    assert.deepEqual(body(h.requests[1]), {
      cmd: ['echo', '-n', 'hi'],
      env: { A: '1', B: '2' },
      timeoutSeconds: 5,
      encoding: 'base64',
    })
  })

  it('sends one word as a shell string and stdin when asked', async () => {
    const h = harness()
    assert.equal(await h.run('run', '-i', '--', 'cat | wc -c'), 0)
    assert.equal(h.stdout(), 'ran cat | wc -c')
    const sent = body(h.requests[1])
    assert.equal(sent.cmd, 'cat | wc -c')
    assert.equal(sent.stdin, Buffer.from('from stdin').toString('base64'))
    assert.equal(sent.stdinEncoding, 'base64')
  })

  it('still kills the sandbox when exec fails, and prints CODE: message', async () => {
    const h = harness()
    h.server.agent.calls.exec = () =>
      Promise.reject(new AppError('SANDBOX_ERRORED', 'sandbox ran out of memory', { reason: 'out_of_memory' }))
    assert.equal(await h.run('run', 'true'), 1)
    assert.equal(h.stderr(), 'forkbox: SANDBOX_ERRORED: sandbox ran out of memory\n')
    assert.equal(h.requests.at(-1)?.method, 'DELETE')
    assert.equal(h.server.agent.stopped.length, 1)
  })

  it('on Ctrl-C aborts the exec, kills the sandbox and exits 130', async () => {
    const h = harness()
    let execAborted = false
    h.server.agent.calls.exec = (_req, signal) => {
      queueMicrotask(() => h.interrupt())
      return new Promise((_, reject) =>
        signal?.addEventListener('abort', () => {
          execAborted = true
          reject(new AppError('CANCELLED', 'the client went away'))
        }),
      )
    }
    assert.equal(await h.run('run', 'sleep', '100'), 130)
    assert.equal(h.requests.at(-1)?.method, 'DELETE')
    assert.equal(h.server.agent.stopped.length, 1)
    assert.ok(execAborted, 'the server saw the request go away')
  })

  it('reports usage errors without touching the network', async () => {
    const h = harness()
    assert.equal(await h.run('run', 'ls', '-la'), 1)
    assert.match(h.stderr(), /^forkbox: USAGE: unknown option '-la' \(put the sandbox command after --\)\n$/)
    assert.equal(await h.run('run', '--timeout', 'soon', 'ls'), 1)
    assert.match(h.stderr(), /forkbox: USAGE: .*positive number of seconds/)
    assert.equal(h.requests.length, 0)
  })
})

describe('forkbox exec', () => {
  it('connects and passes cwd, env and timeout', async () => {
    const h = harness()
    const id = await existing(h)
    h.server.agent.nextExec = { stdout: Buffer.from('ok\n') }
    const code = await h.run('exec', id, '--cwd', '/tmp', '--env', 'K=V', '--timeout', '2.5', '--', 'ls', '-la')
    assert.equal(code, 0)
    assert.equal(h.stdout(), 'ok\n')
    assert.deepEqual(lines(h.requests), [`GET /v1/sandboxes/${id}`, `POST /v1/sandboxes/${id}/exec`])
    assert.deepEqual(body(h.requests[1]), {
      cmd: ['ls', '-la'],
      cwd: '/tmp',
      env: { K: 'V' },
      timeoutSeconds: 2.5,
      encoding: 'base64',
    })
  })

  // the server answers a command killed at its timeout with EXEC_TIMEOUT (408) carrying the output so far
  it('prints the output a timed-out command wrote, says it timed out and exits 124', async () => {
    const h = harness()
    const id = await existing(h)
    h.server.agent.nextExec = { exitCode: 137, timedOut: true }
    assert.equal(await h.run('exec', id, '--timeout', '1', 'sleep 5'), 124)
    assert.equal(h.stdout(), 'ran sleep 5')
    assert.equal(h.stderr(), 'forkbox: command timed out after 1s and was killed\n')
  })

  it('prints a not-found error', async () => {
    const h = harness()
    assert.equal(await h.run('exec', 'nope', 'true'), 1)
    assert.equal(h.stderr(), 'forkbox: SANDBOX_NOT_FOUND: no sandbox nope\n')
  })
})

describe('forkbox ls', () => {
  async function twoSandboxes(h: Harness): Promise<[string, string]> {
    const a = await existing(h, { ttlSeconds: 300, metadata: { user: 'a', job: '7' } })
    const b = await existing(h, { ttlSeconds: 300 })
    h.server.agent.die(b, 'out_of_memory')
    return [a, b]
  }

  it('prints a table of running sandboxes by default', async () => {
    const h = harness()
    const [a] = await twoSandboxes(h)
    assert.equal(await h.run('ls'), 0)
    assert.equal(h.requests[0]?.url.search, '?state=running')
    const pad = ' '.repeat(a.length - 2)
    assert.equal(
      h.stdout(),
      [
        `ID${pad}  TEMPLATE  STATE    CREATED  EXPIRES  METADATA`,
        `${a}  base      running  1m ago   in 4m    user=a,job=7`,
        '',
      ].join('\n'),
    )
  })

  it('--all shows ended sandboxes with their reason', async () => {
    const h = harness()
    const [, b] = await twoSandboxes(h)
    assert.equal(await h.run('ls', '--all'), 0)
    assert.match(h.stdout(), new RegExp(`^${b}  base      errored \\(out_of_memory\\)  1m ago   -`, 'm'))
  })

  it('--all drops the state filter, -m filters by metadata, --json prints JSON', async () => {
    const h = harness()
    const [a] = await twoSandboxes(h)
    assert.equal(await h.run('ls', '--all', '--json', '-m', 'user=a'), 0)
    assert.equal(h.requests[0]?.url.search, '?metadata.user=a')
    const listed = JSON.parse(h.stdout())
    assert.deepEqual(
      listed.map((s: { id: string; metadata: unknown }) => [s.id, s.metadata]),
      [[a, { user: 'a', job: '7' }]],
    )
  })
})

describe('forkbox kill', () => {
  it('kills each id and keeps going after a failure', async () => {
    const h = harness()
    const one = await existing(h)
    const two = await existing(h)
    assert.equal(await h.run('kill', one, 'bad', two), 1)
    assert.equal(h.stdout(), `${one}\n${two}\n`)
    assert.equal(h.stderr(), 'forkbox: SANDBOX_NOT_FOUND: no sandbox bad\n')
    assert.deepEqual(h.server.agent.stopped, [one, two])
  })
})

describe('forkbox hosts', () => {
  it('on one box (no fleet) says so and exits 1', async () => {
    const h = harness()
    assert.equal(await h.run('hosts', 'ls'), 1)
    assert.match(h.stderr(), /^forkbox: NOT_FOUND: this control plane runs its own agent: it has no fleet of hosts\n$/)
    assert.equal(await h.run('hosts', 'drain', 'h1'), 1)
    assert.deepEqual(lines(h.requests), ['GET /v1/hosts', 'POST /v1/hosts/h1/drain'])
  })
})

describe('forkbox keys', () => {
  it('create prints only the secret on stdout', async () => {
    const h = harness()
    assert.equal(await h.run('keys', 'create', 'ci'), 0)
    assert.match(h.stdout(), /^fbx_\w+\n$/)
    assert.match(h.stderr(), /created key key_/)
    assert.deepEqual(body(h.requests[0]), { name: 'ci' })
    const secret = h.stdout().trim()
    assert.equal((await h.server.cp.keys.list()).find((k) => k.name === 'ci')?.prefix, secret.slice(0, 12))
  })

  it('list and revoke', async () => {
    const h = harness()
    const ci = await h.server.cp.keys.create({ name: 'ci' })
    assert.equal(await h.run('keys', 'list'), 0)
    const rows = h.stdout().trimEnd().split('\n')
    assert.match(rows[0] ?? '', /^ID\s+NAME\s+PREFIX\s+CREATED\s+EXPIRES\s+REVOKED$/)
    assert.match(rows[2] ?? '', new RegExp(`^${ci.id}\\s+ci\\s+${ci.prefix}\\s+1m ago\\s+-\\s+-$`))
    assert.equal(await h.run('keys', 'revoke', ci.id), 0)
    assert.deepEqual(lines(h.requests), ['GET /v1/keys', `DELETE /v1/keys/${ci.id}`])
    assert.ok((await h.server.cp.keys.list()).find((k) => k.id === ci.id)?.revokedAt)
  })

  it('create with quotas, scopes, rates and a TTL; set replaces each kind given; show and rotate me', async () => {
    const h = harness()
    assert.equal(
      await h.run(
        'keys',
        'create',
        'team',
        '--sandboxes',
        '3',
        '--memory-mb',
        '2048',
        '--read-only',
        '--no-network',
        '--templates',
        'base,code-interpreter',
        '--data-rate',
        '5/10',
        '--ttl',
        '60',
      ),
      0,
    )
    assert.deepEqual(body(h.requests[0]), {
      name: 'team',
      scopes: { readOnly: true, noNetwork: true, templates: ['base', 'code-interpreter'] },
      quotas: { sandboxes: 3, memoryMB: 2048 },
      rateLimits: { data: { perSecond: 5, burst: 10 } },
      ttlSeconds: 60,
    })
    const team = (await h.server.cp.keys.list()).find((k) => k.name === 'team')
    assert.ok(team?.expiresAt)
    assert.equal(await h.run('keys', 'set', team.id, '--vcpus', '4', '--clear-scopes', '--no-expiry'), 0)
    assert.deepEqual(body(h.requests[1]), { quotas: { vcpus: 4 }, scopes: {}, expiresAt: null })
    const after = await h.server.cp.keys.get(team.id)
    assert.deepEqual(
      [after.quotas, after.scopes, after.expiresAt, after.rateLimits],
      [{ vcpus: 4 }, {}, null, { data: { perSecond: 5, burst: 10 } }],
    )
    assert.match(h.stdout(), /quotas\s+vcpus=4\n/)
    assert.equal(await h.run('keys', 'show', 'me'), 0)
    assert.match(h.stdout(), /\(admin, admin\)/)
    assert.equal(await h.run('keys', 'rotate', team.id, '--grace', '30'), 0)
    assert.deepEqual(body(h.requests.at(-1)), { graceSeconds: 30 })
    assert.match(h.stderr(), /the old secret works until /)
    assert.equal(await h.run('keys', 'set', team.id, '--data-rate', 'fast'), 1)
  })

  it('usage and audit print what the server answers', async () => {
    const h = harness()
    assert.equal(await h.run('usage', '--since', '2h', '--by', 'total', '--json'), 0)
    const report = JSON.parse(h.stdout()) as { granularity: string; buckets: unknown[]; total: { vcpuSeconds: number } }
    assert.equal(report.granularity, 'total')
    assert.equal(report.buckets.length, 1)
    assert.deepEqual(lines(h.requests), ['GET /v1/usage'])
    assert.equal(h.requests[0]?.url.searchParams.get('granularity'), 'total')
    const from = Date.parse(h.requests[0]?.url.searchParams.get('from') ?? '')
    assert.ok(Math.abs(Date.now() - 2 * 3600_000 - from) < 10 * 60_000)
    assert.equal(await h.run('audit', '--since', '1h'), 0)
    assert.match(h.stdout(), /\}\nAT\s+KEY\s+ACTION\s+TARGET\s+STATUS\s+FROM\n/)
    assert.equal(await h.run('usage', '--by', 'week'), 1)
  })

  it("a non-admin key gets the server's error", async () => {
    const h = harness()
    h.ctx.connection = { ...h.ctx.connection, apiKey: (await h.server.cp.keys.create({ name: 'tenant' })).key }
    assert.equal(await h.run('keys', 'list'), 1)
    assert.match(h.stderr(), /^forkbox: FORBIDDEN: only an admin key can .*\n$/)
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
    const h = harness({ loadHost: async () => host })
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
    const h = harness({ loadHost: async () => host })
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
    const h = harness({ loadHost: async () => host, stdoutIsTerminal: false })
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
    const h = harness({
      loadHost: async () => ({
        startHost: () => Promise.reject(Object.assign(new Error('listen EADDRINUSE'), { code: 'EADDRINUSE' })),
      }),
    })
    assert.equal(await h.run('up'), 1)
    assert.equal(h.stderr(), 'forkbox: EADDRINUSE: listen EADDRINUSE\n')
  })
})

describe('forkbox snapshot and fork', () => {
  it('snapshot prints the snapshot id', async () => {
    const h = harness()
    const id = await existing(h)
    assert.equal(await h.run('snapshot', id), 0)
    const [snapshot] = h.server.agent.snapshots
    assert.equal(h.stdout(), `${snapshot}\n`)
    assert.deepEqual(lines(h.requests), [`GET /v1/sandboxes/${id}`, `POST /v1/sandboxes/${id}/snapshots`])
  })

  it('fork asks for the count and prints one id a line', async () => {
    const h = harness()
    const id = await existing(h)
    assert.equal(await h.run('fork', id, '--count', '2'), 0)
    const forks = h.server.agent.started.slice(1).map((s) => s.id)
    assert.equal(forks.length, 2)
    assert.equal(h.stdout(), `${forks.join('\n')}\n`)
    assert.deepEqual(body(h.requests[1]), { count: 2 })
    assert.equal(await h.run('fork', id, '--count', '0'), 1)
  })
})
