// The packages as a user gets them: `npm pack -w` of the SDK and the CLI, and the Python wheel,
// installed into fresh projects outside the repository (no workspace, no tsx) and run against a
// real server: an ESM script, a CommonJS script, a TypeScript project under `tsc --strict`, the
// SDK's browser build bundled by esbuild and run in headless Chromium from another origin (the
// server's CORS allow-list), the CLI installed globally, and the wheel in a fresh venv.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { mkdtemp } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { promisify } from 'node:util'
import { FORKBOX_VERSION } from '@forkbox/protocol'
import { build } from 'esbuild'
import { chromium } from 'playwright-core'
import { useTestHost } from './harness.ts'

const root = new URL('../../', import.meta.url).pathname
const run = promisify(execFile)
const bin = (name: string) => join(root, 'node_modules/.bin', name)

let work = ''
const tarballs: Record<'sdk' | 'cli' | 'ai', string> = { sdk: '', cli: '', ai: '' }

/** A page server on loopback: `/` is a page that loads `/app.js`, the bundle the test wrote. */
function pageServer(files: Map<string, string>): Server {
  return createServer((req, res) => {
    const body = files.get(req.url === '/' ? '/index.html' : (req.url ?? ''))
    if (body === undefined) return res.writeHead(404).end()
    const type = req.url?.endsWith('.js') ? 'text/javascript' : 'text/html'
    res.writeHead(200, { 'content-type': type }).end(body)
  })
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

const pageFiles = new Map<string, string>()
const allowed = pageServer(pageFiles)
const other = pageServer(pageFiles)
// listening before the host starts: the host's CORS allow-list names the first
const allowedOrigin = await listen(allowed)
const otherOrigin = await listen(other)

const host = useTestHost({ options: () => ({ corsOrigins: [allowedOrigin] }) })

/** A fresh npm project in its own temp dir (outside the repo) with `packages` (tarballs, or from npm) installed. */
async function project(name: string, ...packages: string[]): Promise<string> {
  const dir = join(work, name)
  await run('mkdir', ['-p', dir])
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `fbx-${name}`, private: true }))
  await run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', ...packages], {
    cwd: dir,
    timeout: 300_000,
  })
  return dir
}

/**
 * publint (`--strict`: a warning fails as an error would) on the package as packed, and attw on
 * its tarball, find no problem (`withoutNode10`: none but node10 resolution's).
 */
async function assertLintsClean(dir: string, tarball: string, { withoutNode10 = false } = {}): Promise<void> {
  const lint = await run(bin('publint'), ['run', join(root, dir), '--strict', '--pack', 'npm'])
  assert.doesNotMatch(lint.stdout, /Errors|Warnings|Suggestions/, lint.stdout)
  const profile = withoutNode10 ? ['--profile', 'node16'] : []
  const types = await run(bin('attw'), [tarball, ...profile, '--format', 'json'], { maxBuffer: 64 * 1024 * 1024 })
  const report = JSON.parse(types.stdout) as { problems?: Record<string, { resolutionKind?: string }[]> }
  const problems = Object.values(report.problems ?? {})
    .flat()
    .filter((p) => !(withoutNode10 && p.resolutionKind === 'node10'))
  assert.deepEqual(problems, [], types.stdout.slice(0, 2000))
}

/** The environment of a user's shell that knows only the server: no repo, no credentials file. */
function userEnv(): NodeJS.ProcessEnv {
  const { url, apiKey } = host().conn
  return { PATH: process.env.PATH, HOME: work, FORKBOX_URL: url, FORKBOX_API_KEY: apiKey }
}

describe('installable packages', () => {
  before(async () => {
    work = await mkdtemp(join(tmpdir(), 'fbx-packages-'))
    // the release step, as the README gives it: one `npm pack -w` (prepack builds)
    const packages = ['packages/sdk', 'apps/cli', 'packages/ai'].flatMap((p) => ['-w', p])
    await run('npm', ['pack', ...packages, '--pack-destination', work], {
      cwd: root,
      timeout: 300_000,
    })
    for (const f of readdirSync(work)) {
      if (f.startsWith('forkbox-sdk-')) tarballs.sdk = join(work, f)
      if (f.startsWith('forkbox-cli-')) tarballs.cli = join(work, f)
      if (f.startsWith('forkbox-ai-')) tarballs.ai = join(work, f)
    }
    assert.ok(tarballs.sdk.endsWith(`forkbox-sdk-${FORKBOX_VERSION}.tgz`), tarballs.sdk)
    assert.ok(tarballs.cli.endsWith(`forkbox-cli-${FORKBOX_VERSION}.tgz`), tarballs.cli)
    assert.ok(tarballs.ai.endsWith(`forkbox-ai-${FORKBOX_VERSION}.tgz`), tarballs.ai)
  })
  after(() => {
    allowed.close()
    other.close()
    if (work) rmSync(work, { recursive: true, force: true })
  })

  it('the SDK tarball holds its build and manifest only, and publint and attw find nothing wrong', async () => {
    const { stdout } = await run('tar', ['-tzf', tarballs.sdk])
    const files = stdout.trim().split('\n').sort()
    assert.ok(files.includes('package/dist/index.js') && files.includes('package/dist/web/index.js'), stdout)
    assert.ok(files.includes('package/dist/index.d.ts') && files.includes('package/dist/index.d.cts'), stdout)
    assert.deepEqual(
      files.filter((f) => !f.startsWith('package/dist/')),
      ['package/README.md', 'package/package.json'],
    )
    const manifest = JSON.parse((await run('tar', ['-xzOf', tarballs.sdk, 'package/package.json'])).stdout)
    for (const dep of Object.keys(manifest.dependencies)) assert.ok(!dep.startsWith('@forkbox/'), dep)
    await assertLintsClean('packages/sdk', tarballs.sdk)
  })

  it('@forkbox/ai installs beside the SDK and the AI SDK, lints clean, and its tools run a cell for a mock model', async () => {
    // its entry points are subpaths, which node10 resolution (no `exports`) cannot reach by design
    await assertLintsClean('packages/ai', tarballs.ai, { withoutNode10: true })
    const dir = await project('ai', tarballs.sdk, tarballs.ai, 'ai@6')
    writeFileSync(
      join(dir, 'app.mjs'),
      `import { sandboxTools } from '@forkbox/ai/vercel'
import { generateText, stepCountIs } from 'ai'
import { MockLanguageModelV3 } from 'ai/test'
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } }
const model = new MockLanguageModelV3({ doGenerate: [
  { content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'run_code', input: JSON.stringify({ code: '6 * 7' }) }], finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] },
  { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] },
] })
const box = sandboxTools()
try {
  const result = await generateText({ model, tools: box.tools, stopWhen: stepCountIs(3), prompt: 'six times seven' })
  const output = result.steps[0].toolResults[0].output
  console.log(JSON.stringify({ text: result.text, tool: output.text }))
} finally {
  await box.close()
}
`,
    )
    const r = await run(process.execPath, ['app.mjs'], { cwd: dir, env: userEnv(), timeout: 120_000 })
    assert.deepEqual(JSON.parse(r.stdout), { text: 'done', tool: 'result: 42' })
  })

  it('an ESM script and a CommonJS script run a command and a cell with the installed SDK', async () => {
    const dir = await project('node', tarballs.sdk)
    writeFileSync(
      join(dir, 'app.mjs'),
      `import { Sandbox, VERSION } from '@forkbox/sdk'
const sbx = await Sandbox.create({ template: 'code-interpreter', ttlSeconds: 120 })
try {
  const r = await sbx.exec('echo esm-$((6*7))')
  const cell = await sbx.runCode('6 * 7')
  console.log(JSON.stringify({ out: r.stdout.trim(), cell: cell.text, version: VERSION }))
} finally {
  await sbx.kill()
}
`,
    )
    writeFileSync(
      join(dir, 'app.cjs'),
      `const { Sandbox, ForkboxError } = require('@forkbox/sdk')
;(async () => {
  const sbx = await Sandbox.create({ template: 'base', ttlSeconds: 120 })
  const r = await sbx.exec('echo cjs-$((6*7))')
  await sbx.kill()
  const after = await sbx.exec('true').catch((e) => [e instanceof ForkboxError, e.code])
  console.log(JSON.stringify({ out: r.stdout.trim(), after }))
})().catch((e) => { console.error(e); process.exit(1) })
`,
    )
    const esm = await run(process.execPath, ['app.mjs'], { cwd: dir, env: userEnv(), timeout: 120_000 })
    assert.deepEqual(JSON.parse(esm.stdout), { out: 'esm-42', cell: '42', version: FORKBOX_VERSION })
    const cjs = await run(process.execPath, ['app.cjs'], { cwd: dir, env: userEnv(), timeout: 120_000 })
    assert.deepEqual(JSON.parse(cjs.stdout), { out: 'cjs-42', after: [true, 'SANDBOX_NOT_RUNNING'] })
  })

  it('a TypeScript project type-checks against the shipped types under --strict, and they are not `any`', async () => {
    const dir = await project('typescript', tarballs.sdk)
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { strict: true, noEmit: true, module: 'NodeNext', target: 'ES2022', lib: ['ES2022', 'DOM'] },
        include: ['*.ts', '*.cts'],
      }),
    )
    const usage = `const sbx: Sandbox = await Sandbox.create({ template: 'base', metadata: { user: 'a' } })
const out: ExecOutput = await sbx.exec('true')
const code: number = out.exitCode
const cell: Execution = await sbx.runCode('1')
const text: string | undefined = cell.text
// @ts-expect-error ttlSeconds is a number
await Sandbox.create({ ttlSeconds: 'soon' })
// @ts-expect-error no such method
sbx.teleport()
const err: ForkboxErrorCode = new ForkboxError('TIMEOUT', 'x').code
export { code, text, err }
`
    writeFileSync(
      join(dir, 'index.ts'),
      `import { type ExecOutput, type Execution, ForkboxError, type ForkboxErrorCode, Sandbox } from '@forkbox/sdk'\n${usage}`,
    )
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'fbx-typescript', type: 'module', private: true }))
    await run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', '.'], { cwd: dir })
    // the CommonJS types (index.d.cts) too
    writeFileSync(
      join(dir, 'check.cts'),
      `import sdk = require('@forkbox/sdk')\nconst code: number = sdk.VERSION.length\n// @ts-expect-error VERSION is a string\nconst wrong: boolean = sdk.VERSION\nexport = { code, wrong }\n`,
    )
    await run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', '.'], { cwd: dir })
    // and a real type error is reported: the check can fail
    writeFileSync(
      join(dir, 'broken.ts'),
      `import { Sandbox } from '@forkbox/sdk'\nconst n: number = Sandbox\nexport { n }\n`,
    )
    await assert.rejects(
      run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', '.'], { cwd: dir }),
      (e: { stdout: string }) => /broken\.ts.*TS2322/s.test(e.stdout),
    )
  })

  it('the browser build, bundled by esbuild with no node: import, runs a cell and a terminal from an allowed origin only', async () => {
    const dir = await project('browser', tarballs.sdk)
    writeFileSync(
      join(dir, 'app.js'),
      `import { Sandbox } from '@forkbox/sdk'
const { url, apiKey } = JSON.parse(decodeURIComponent(location.hash.slice(1)))
window.result = (async () => {
  const sbx = await Sandbox.create({ template: 'code-interpreter', ttlSeconds: 120, apiKey, url })
  try {
    const cell = await sbx.runCode('print("from", "chromium"); 6 * 7')
    let screen = ''
    const term = await sbx.pty.create({ cols: 80, rows: 24, cmd: 'echo pty-$((6*7)); sleep 30', onData: (d) => { screen += new TextDecoder().decode(d) } })
    for (let i = 0; i < 100 && !screen.includes('pty-42'); i++) await new Promise((r) => setTimeout(r, 100))
    term.kill()
    return { cell: cell.text, stdout: cell.logs.stdout.join(''), terminal: screen.includes('pty-42') }
  } finally {
    await sbx.kill()
  }
})().catch((e) => ({ error: String(e.code ?? e.name) + ': ' + e.message }))
`,
    )
    const bundle = await build({
      entryPoints: [join(dir, 'app.js')],
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: 'es2022',
      write: false,
      absWorkingDir: dir,
      logLevel: 'silent',
    })
    const js = bundle.outputFiles[0]?.text ?? ''
    assert.ok(js.includes('runCode'), 'the SDK is in the bundle')
    assert.doesNotMatch(js, /["']node:|require\(["'](ws|fs|path|os)["']\)|from ["'](ws|fs|path|os)["']/)
    // what Cloudflare's bundler asks for a Worker (workerd, worker, browser) gets the same build
    const worker = await build({
      entryPoints: [join(dir, 'app.js')],
      bundle: true,
      format: 'esm',
      platform: 'neutral',
      conditions: ['workerd', 'worker', 'browser'],
      mainFields: ['module', 'main'],
      target: 'es2022',
      write: false,
      absWorkingDir: dir,
      logLevel: 'silent',
    })
    assert.doesNotMatch(worker.outputFiles[0]?.text ?? '', /["']node:|from ["'](ws|fs|path|os)["']/)
    pageFiles.set('/index.html', '<!doctype html><title>fbx</title><script type="module" src="/app.js"></script>')
    pageFiles.set('/app.js', js)

    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    })
    try {
      const hash = encodeURIComponent(JSON.stringify({ url: host().conn.url, apiKey: host().conn.apiKey }))
      const outcome = async (origin: string) => {
        const page = await browser.newPage()
        await page.goto(`${origin}/#${hash}`)
        const value = await page.evaluate(() => (window as unknown as { result: Promise<unknown> }).result)
        await page.close()
        return value
      }
      assert.deepEqual(await outcome(allowedOrigin), { cell: '42', stdout: 'from chromium\n', terminal: true })
      // a page of an origin not on the list is refused by the browser (no CORS headers for it)
      const refused = (await outcome(otherOrigin)) as { error?: string }
      assert.match(refused.error ?? '', /CONNECTION_ERROR/, JSON.stringify(refused))
    } finally {
      await browser.close()
    }
  })

  it('/openapi.json is public, and /docs renders every operation of it in Chromium', async () => {
    const { url } = host().conn
    const res = await fetch(`${url}/openapi.json`)
    assert.equal(res.status, 200)
    const spec = (await res.json()) as { paths: Record<string, Record<string, unknown>> }
    const methods = new Set(['get', 'post', 'put', 'patch', 'delete'])
    const operations = Object.values(spec.paths).flatMap((p) => Object.keys(p).filter((m) => methods.has(m)))
    assert.ok(operations.length > 30, `${operations.length} operations`)
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    })
    try {
      const page = await browser.newPage()
      const errors: string[] = []
      page.on('pageerror', (e) => errors.push(e.message))
      await page.goto(`${url}/docs`)
      await page.waitForSelector('.opblock', { timeout: 30_000 })
      assert.equal(await page.locator('.opblock').count(), operations.length)
      assert.match((await page.locator('body').textContent()) ?? '', /\/v1\/sandboxes\/\{id\}\/exec/)
      assert.deepEqual(errors, [])
    } finally {
      await browser.close()
    }
  })

  it('the CLI installed globally from its tarball runs a command in a new sandbox, and says `up` needs a checkout', async () => {
    const prefix = join(work, 'global')
    await run(
      'npm',
      ['install', '-g', '--prefix', prefix, '--no-audit', '--no-fund', '--loglevel=error', tarballs.cli],
      {
        timeout: 300_000,
      },
    )
    const forkbox = join(prefix, 'bin/forkbox')
    const env = { ...userEnv(), PATH: `${join(prefix, 'bin')}:${process.env.PATH}` }
    const r = await run(forkbox, ['run', '--', 'python3', '-c', 'print(42)'], { cwd: work, env, timeout: 120_000 })
    assert.equal(r.stdout, '42\n')
    const version = await run(forkbox, ['--version'], { cwd: work, env })
    assert.equal(version.stdout.trim(), FORKBOX_VERSION)
    await assert.rejects(run(forkbox, ['up'], { cwd: work, env }), (e: { stderr: string; code: number }) => {
      assert.notEqual(e.code, 0)
      assert.match(e.stderr, /HOST_UNAVAILABLE.*checkout/s)
      return true
    })
  })

  it('the Python wheel and sdist build offline, and the wheel installed in a fresh venv runs a cell', async () => {
    const py = join(work, 'py')
    // pip asks the machine's local index; an index it cannot reach (pypi.org here) is given up at
    // once instead of after ~20 s of retries per install
    const pipEnv = { ...process.env, PIP_RETRIES: '0', PIP_TIMEOUT: '3', PIP_DISABLE_PIP_VERSION_CHECK: '1' }
    await run('python3', ['-m', 'venv', join(py, 'tools')])
    await run(join(py, 'tools/bin/pip'), ['install', '--quiet', 'build'], { env: pipEnv, timeout: 300_000 })
    await run(join(py, 'tools/bin/python'), ['-m', 'build', '--outdir', join(py, 'dist'), join(root, 'python')], {
      cwd: py,
      env: pipEnv,
      timeout: 300_000,
    })
    const built = readdirSync(join(py, 'dist')).sort()
    assert.deepEqual(built, [`forkbox-${FORKBOX_VERSION}-py3-none-any.whl`, `forkbox-${FORKBOX_VERSION}.tar.gz`])
    const wheel = join(py, 'dist', built[0] as string)
    const listing = (await run('python3', ['-m', 'zipfile', '-l', wheel])).stdout
    assert.match(listing, /forkbox\/py\.typed/)
    await run('python3', ['-m', 'venv', join(py, 'user')])
    await run(join(py, 'user/bin/pip'), ['install', '--quiet', wheel], { env: pipEnv, timeout: 300_000 })
    writeFileSync(
      join(py, 'app.py'),
      `import json, forkbox
from forkbox import Sandbox
with Sandbox.create(template="code-interpreter", ttl_seconds=120) as sbx:
    cell = sbx.run_code("6 * 7")
    print(json.dumps({"cell": cell.text, "version": forkbox.__version__, "file": forkbox.__file__}))
`,
    )
    const r = await run(join(py, 'user/bin/python'), [join(py, 'app.py')], {
      cwd: py,
      env: userEnv(),
      timeout: 120_000,
    })
    const out = JSON.parse(r.stdout) as { cell: string; version: string; file: string }
    assert.equal(out.cell, '42')
    assert.equal(out.version, FORKBOX_VERSION)
    assert.ok(out.file.startsWith(join(py, 'user')), out.file)
    assert.equal(
      readFileSync(join(root, 'python/pyproject.toml'), 'utf8').includes(`version = "${FORKBOX_VERSION}"`),
      true,
    )
  })
})
