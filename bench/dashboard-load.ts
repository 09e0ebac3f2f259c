// A first load of the web dashboard and of the API reference (/docs) in Chromium, each in a fresh
// browser context (an empty cache): the encoded bytes moved (CDP's encodedDataLength, headers
// included) and the time to something a user can use (the sign-in form visible; /docs' operations
// rendered), p50/p99 over `--loads` loads, on loopback and on a 4 Mbit/s, 80 ms link (CDP's
// network emulation; `--no-slow-link` skips it). Not a test: it asserts nothing.
//   node --import tsx bench/dashboard-load.ts [--loads 10] [--no-slow-link] [--out FILE]
// It measures the dashboard as built in this checkout (`npm run build -w apps/dashboard`). Before
// and after a change: run it in a git worktree of each commit, as bench/before-after.ts sets one up
// (node_modules hard-linked in, this script copied in), after building the dashboard there.
import { writeFileSync } from 'node:fs'

const arg = (name: string) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined)
const LOADS = Number(arg('--loads') ?? 10)

type Samples = Record<string, number[]>

// loopback moves any size at once: the loads are timed again on a mediocre mobile link, which
// Chromium applies to the bytes as they come over the wire (encoded)
const SLOW_LINK = { offline: false, latency: 80, downloadThroughput: 4e6 / 8, uploadThroughput: 1e6 / 8 }
const SLOW_LINK_NAME = 'a 4 Mbit/s, 80 ms link'

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? Number.NaN
}

/** One tree's measurements: a bench host, Chromium, `LOADS` first loads of each page. */
async function measureHere(): Promise<{ samples: Samples; notes: Record<string, string> }> {
  // imported here: the comparing run needs none of the workspace
  const { chromium } = await import('playwright-core')
  const { benchHost } = await import('./lib.ts')
  const host = await benchHost('dashboard-load', 0)
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  })
  const samples: Samples = {}
  const notes: Record<string, string> = {}
  const add = (name: string, x: number) => {
    samples[name] ??= []
    samples[name].push(x)
  }
  try {
    /**
     * Opens `path` in a fresh context, times `ready`, then (once the network is idle) sums the
     * encoded bytes of every response, and, if `reload`, what a second load in the same context moves.
     */
    const load = async (
      path: string,
      ready: (page: import('playwright-core').Page) => Promise<unknown>,
      { reload = false, slow = false } = {},
    ) => {
      const context = await browser.newContext()
      const page = await context.newPage()
      const cdp = await context.newCDPSession(page)
      await cdp.send('Network.enable')
      if (slow) await cdp.send('Network.emulateNetworkConditions', SLOW_LINK)
      const urls = new Map<string, { url: string; encoding: string; status: number }>()
      let bytes = 0
      cdp.on('Network.responseReceived', (e) =>
        urls.set(e.requestId, {
          url: e.response.url,
          encoding: String(e.response.headers['content-encoding'] ?? e.response.headers['Content-Encoding'] ?? ''),
          status: e.response.status,
        }),
      )
      const byUrl = new Map<string, number>()
      cdp.on('Network.loadingFinished', (e) => {
        bytes += e.encodedDataLength
        const url = urls.get(e.requestId)?.url ?? '?'
        byUrl.set(url, (byUrl.get(url) ?? 0) + e.encodedDataLength)
      })
      const t0 = performance.now()
      await page.goto(`${host.conn.url}${path}`)
      await ready(page)
      const ms = performance.now() - t0
      await page.waitForLoadState('networkidle')
      const first = { ms, bytes, byUrl: new Map(byUrl), responses: [...urls.values()] }
      let again: number | undefined
      if (reload) {
        bytes = 0
        await page.reload()
        await ready(page)
        await page.waitForLoadState('networkidle')
        again = bytes
      }
      await context.close()
      return { ...first, again }
    }

    const signInVisible = (page: import('playwright-core').Page) =>
      page.getByLabel('API key').waitFor({ state: 'visible' })
    const operationsRendered = async (page: import('playwright-core').Page) => {
      await page.locator('.opblock').first().waitFor({ state: 'visible', timeout: 60_000 })
      return page.locator('.opblock').count()
    }

    // the first /docs load after the server starts: it may pay for making the encodings once
    const cold = await load('/docs', operationsRendered)
    notes['/docs first load after server start'] = `${cold.ms.toFixed(0)} ms, ${(cold.bytes / 1024).toFixed(0)} KiB`
    // and one untimed dashboard load: Chromium's own first-launch work is no page's cost
    await load('/', signInVisible)

    for (let i = 0; i < LOADS; i++) {
      const dash = await load('/', signInVisible, { reload: true })
      add('dashboard: time to sign-in form visible (ms)', dash.ms)
      add('dashboard: encoded bytes, first load (KiB)', dash.bytes / 1024)
      add('dashboard: encoded bytes, reload in the same context (KiB)', (dash.again ?? Number.NaN) / 1024)
      const docs = await load('/docs', operationsRendered)
      if (!process.argv.includes('--no-slow-link')) {
        add(
          `dashboard on ${SLOW_LINK_NAME}: time to sign-in form visible (ms)`,
          (await load('/', signInVisible, { slow: true })).ms,
        )
        add(
          `/docs on ${SLOW_LINK_NAME}: time to operations rendered (ms)`,
          (await load('/docs', operationsRendered, { slow: true })).ms,
        )
      }
      add('/docs: time to operations rendered (ms)', docs.ms)
      add('/docs: encoded bytes, first load (KiB)', docs.bytes / 1024)
      if (i === 0) {
        for (const [what, l] of [
          ['dashboard', dash],
          ['/docs', docs],
        ] as const)
          notes[`${what} responses`] = l.responses
            .filter((r) => !r.url.startsWith('data:'))
            .map((r) => {
              const kib = ((l.byUrl.get(r.url) ?? 0) / 1024).toFixed(1)
              return `${new URL(r.url).pathname} ${r.status} ${r.encoding || 'identity'} ${kib} KiB`
            })
            .join('; ')
        const page = await (await browser.newContext()).newPage()
        await page.goto(`${host.conn.url}/docs`)
        await operationsRendered(page)
        notes['/docs sections'] = (await page.locator('.opblock-tag').allInnerTexts())
          .map((t) => t.split('\n')[0])
          .join(', ')
        notes['/docs operations'] = String(await page.locator('.opblock').count())
        await page.context().close()
      }
    }
  } finally {
    await browser.close()
    await host.close()
  }
  return { samples, notes }
}

const { samples, notes } = await measureHere()
for (const [name, xs] of Object.entries(samples))
  console.error(
    `${name.padEnd(60)} p50 ${pct(xs, 50).toFixed(1).padStart(8)}   p99 ${pct(xs, 99).toFixed(1).padStart(8)}   (n=${xs.length})`,
  )
for (const [k, v] of Object.entries(notes)) console.error(`${k}: ${v}`)
const summary = Object.entries(samples).map(([k, xs]) => [k, { p50: pct(xs, 50), p99: pct(xs, 99), n: xs.length }])
const out = arg('--out')
if (out) writeFileSync(out, JSON.stringify({ samples, notes }))
else console.log(JSON.stringify(Object.fromEntries(summary), null, 2))
