// Templates users build: build time of the `agent` Dockerfile cold and from a warm layer cache,
// create → first exec from a custom template against the built-in `base` (both restores, same
// run), create → first query on `postgres`, create → first screenshot on `browser`, and disk use
// of five versions of one template.
// Not a test: it asserts nothing.   node --import tsx bench/templates.ts [--iterations N]
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { defaultAgentConfig } from '@forkbox/agent'
import { Sandbox } from '@forkbox/sdk'
import { chromium } from 'playwright-core'
import { benchHost, N, printSummary, report, timed } from './lib.ts'

const CREATES = Math.min(N, 10)
const templatesDir = process.env.FORKBOX_TEMPLATES_DIR ?? defaultAgentConfig().templatesDir
const repo = new URL('../', import.meta.url).pathname
const host = await benchHost('templates', 0)
const { url, apiKey } = host.conn
const work = mkdtempSync(join(tmpdir(), 'forkbox-bench-tpl-'))
const nonce = `${process.pid}-${Date.now()}`
/** `--only build|create|postgres|browser|disk`: one part (the cold build alone takes minutes). */
const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1] : undefined
const part = (name: string) => only === undefined || only === name

async function call(method: string, path: string, body?: unknown) {
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
  return (await res.json().catch(() => null)) as { build: { id: string }; template: { id: string } } & Record<
    string,
    unknown
  >
}

/** Builds `dockerfile` with the context dir as template `name`; its wall time (ms) and step counts from the log. */
async function build(name: string, dockerfile: string, context: string) {
  const t0 = performance.now()
  const r = await call('POST', '/v1/templates', { name, dockerfile, context: true })
  const tar = execFileSync('tar', ['-C', context, '-cf', '-', '.'], { maxBuffer: 256 * 1024 * 1024 })
  await call('PUT', `/v1/builds/${r.build.id}/context`, tar)
  let b: { status: string; logs: { message: string }[]; error: unknown } | undefined
  for (;;) {
    b = (await call('GET', `/v1/builds/${r.build.id}`)) as unknown as typeof b
    if (b?.status === 'ready' || b?.status === 'failed') break
    await new Promise((res) => setTimeout(res, 200))
  }
  const ms = performance.now() - t0
  if (b?.status !== 'ready') throw new Error(`build of ${name} failed: ${JSON.stringify(b?.error)}`)
  const steps = b.logs.filter((l) => /^#\d+ [A-Z]+ /.test(l.message))
  return {
    ms,
    steps: steps.length,
    cached: steps.filter((l) => l.message.endsWith('(cached)')).length,
    id: r.template.id,
  }
}

function duKB(paths: string[]): number {
  // hardlinked files are counted once per du run: the rootfs dirs are hardlink farms into the layers
  const out = execFileSync('du', ['-sck', ...paths], { encoding: 'utf8' })
  return Number(/^(\d+)\s+total$/m.exec(out)?.[1] ?? Number.NaN)
}

try {
  if (part('build')) {
    // --- agent Dockerfile: cold (a step right after FROM no build has run) and warm (only the last COPY changes)
    const agentDir = join(work, 'agent')
    mkdirSync(agentDir)
    const agentDockerfile = readFileSync(join(repo, 'templates/agent/Dockerfile'), 'utf8').replace(
      /^FROM forkbox:base$/m,
      `FROM forkbox:base\nRUN echo ${nonce} > /etc/bench-nonce`,
    )
    const withCopy = `${agentDockerfile}\nCOPY marker.txt /home/user/workspace/\n`
    writeFileSync(join(agentDir, 'marker.txt'), 'one\n')
    const cold = await build(`bench-agent-${process.pid}`, withCopy, agentDir)
    writeFileSync(join(agentDir, 'marker.txt'), 'two\n')
    const warm = await build(`bench-agent-${process.pid}`, withCopy, agentDir)
    report(`agent Dockerfile build: cold (${cold.steps} steps)`, [cold.ms])
    report(`agent Dockerfile build: warm cache (${warm.cached}/${warm.steps} cached)`, [warm.ms])
    console.error(`  warm / cold = ${(warm.ms / cold.ms).toFixed(3)}`)
    await call('DELETE', `/v1/templates/bench-agent-${process.pid}`)
  }
  if (part('create')) {
    // --- create → first exec: a custom template against base, both restores, interleaved
    const customDir = join(work, 'custom')
    mkdirSync(customDir)
    const custom = `bench-custom-${process.pid}`
    await build(custom, `FROM forkbox:base\nRUN echo ${nonce} > /etc/custom\n`, customDir)
    const createThenExec = (template: string) => async () => {
      const t0 = performance.now()
      const s = await Sandbox.create({ ...host.conn, template })
      await s.exec(['true'])
      const ms = performance.now() - t0
      await s.kill()
      return ms
    }
    const base: number[] = []
    const mine: number[] = []
    for (let i = 0; i < CREATES; i++) {
      base.push(...(await timed(1, createThenExec('base'), 500)))
      mine.push(...(await timed(1, createThenExec(custom), 500)))
    }
    report('create → first exec: built-in base (restore, baseline)', base)
    report('create → first exec: custom Dockerfile template (restore)', mine)
    await call('DELETE', `/v1/templates/${custom}`)
  }
  if (part('postgres'))
    // --- postgres: create → first query
    report(
      'postgres: create → first query',
      await timed(
        Math.min(CREATES, 5),
        async () => {
          const t0 = performance.now()
          const s = await Sandbox.create({ ...host.conn, template: 'postgres' })
          const r = await s.exec(['psql', '-qAt', '-c', 'select 1'])
          const ms = performance.now() - t0
          if (r.stdout !== '1\n') throw new Error(`psql: ${r.stderr}`)
          await s.kill()
          return ms
        },
        500,
      ),
    )

  if (part('browser')) {
    // --- browser: create → first screenshot, over CDP from here (the example's path)
    const screenshot = async () => {
      const t0 = performance.now()
      const s = await Sandbox.create({ ...host.conn, template: 'browser' })
      const browser = await chromium.connectOverCDP(`http://${s.getHost(9222)}`, {
        headers: { 'X-Forkbox-Access-Token': s.accessToken },
      })
      const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage()
      await page.setContent('<h1>forkbox</h1>')
      const png = await page.screenshot()
      const ms = performance.now() - t0
      if (png.length < 100) throw new Error('no screenshot')
      await browser.close()
      await s.kill()
      return ms
    }
    const firstExec = async () => {
      const t0 = performance.now()
      const s = await Sandbox.create({ ...host.conn, template: 'browser' })
      await s.exec(['true'])
      const ms = performance.now() - t0
      await s.kill()
      return ms
    }
    report('browser: create → first exec (baseline: the restore)', await timed(Math.min(CREATES, 5), firstExec, 500))
    report('browser: create → first screenshot over CDP', await timed(Math.min(CREATES, 5), screenshot, 500))
  }

  if (part('disk')) {
    // --- disk: five versions of one template (only its last COPY differs) against one
    const versionsDir = join(work, 'versions')
    mkdirSync(versionsDir)
    const versioned = `bench-versions-${process.pid}`
    const before = new Set(readdirSync(templatesDir).filter((n) => n.startsWith('built-')))
    const rootfs: string[] = []
    for (let v = 1; v <= 5; v++) {
      writeFileSync(join(versionsDir, 'app.bin'), Buffer.alloc(1024 * 1024, v))
      await build(versioned, `FROM forkbox:base\nRUN echo ${nonce} > /etc/v\nCOPY app.bin /opt/app.bin\n`, versionsDir)
      const made = readdirSync(templatesDir).filter((n) => n.startsWith('built-') && !before.has(n))
      for (const n of made) if (!rootfs.includes(join(templatesDir, n))) rootfs.push(join(templatesDir, n))
    }
    const one = duKB(rootfs.slice(0, 1))
    const five = duKB(rootfs)
    console.error(
      `disk: 1 version ${(one / 1024).toFixed(1)} MB, 5 versions ${(five / 1024).toFixed(1)} MB (${rootfs.length} rootfs dirs, hardlinks counted once)`,
    )
    report('disk: 1 version (MB, not ms)', [one / 1024])
    report('disk: 5 versions (MB, not ms)', [five / 1024])
    await call('DELETE', `/v1/templates/${versioned}`)
  }
} finally {
  await host.close()
  rmSync(work, { recursive: true, force: true })
}
printSummary()
