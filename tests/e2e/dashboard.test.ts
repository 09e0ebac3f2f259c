// The web dashboard in a real browser (Debian's Chromium through playwright-core) against a real
// server with real sandboxes: sign in, create, a terminal, a cell that plots, fork ×2 and kill seen
// live, a wrong key, a malformed key, a non-admin key, an unknown id after another sandbox's page,
// the list's actions at a phone's width and with long metadata, a flat memory chart's labels;
// screenshots of each page at a laptop's and a phone's size (artifacts in
// .forkbox-test/screenshots, not committed) and an axe-core scan of each.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { ForkboxClient, Sandbox } from '@forkbox/sdk'
import { type Browser, chromium, type Page } from 'playwright-core'
import { until, useTestHost } from './harness.ts'

const root = new URL('../../', import.meta.url).pathname
const shots = join(root, '.forkbox-test/screenshots')
const host = useTestHost()
let browser: Browser

const VIEWPORTS = { laptop: { width: 1280, height: 800 }, phone: { width: 390, height: 844 } }

/** A page that fails the test on any console error or uncaught exception. */
async function openPage(errors: string[], viewport = VIEWPORTS.laptop): Promise<Page> {
  // bypassCSP: only so the test can inject axe-core; the page itself runs under its CSP
  const page = await browser.newPage({ viewport, bypassCSP: true })
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`${m.text()} ${m.location().url}`)
  })
  page.on('pageerror', (e) => errors.push(e.message))
  return page
}

async function signIn(page: Page, key: string): Promise<void> {
  await page.goto(host().conn.url)
  await page.getByLabel('API key').fill(key)
  await page.getByRole('button', { name: 'Sign in' }).click()
}

/** Serious or critical accessibility violations axe-core finds on the page as it is. */
async function axeViolations(page: Page): Promise<string[]> {
  await page.addScriptTag({ path: join(root, 'node_modules/axe-core/axe.min.js') })
  return page.evaluate(async () => {
    type Violation = { id: string; impact: string; nodes: { target: string[] }[] }
    const axe = (window as unknown as { axe: { run(): Promise<{ violations: Violation[] }> } }).axe
    return (await axe.run()).violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`)
  })
}

/** Screenshots at both sizes and an axe scan of what `page` shows now. */
async function look(page: Page, name: string): Promise<void> {
  for (const [size, viewport] of Object.entries(VIEWPORTS)) {
    await page.setViewportSize(viewport)
    await page.screenshot({ path: join(shots, `${name}-${size}.png`), fullPage: true })
    // usable at that width: nothing pushes the page sideways (wide tables scroll in their own region)
    const width = await page.evaluate(() => document.documentElement.scrollWidth)
    assert.ok(width <= viewport.width, `${name} is ${width} px wide at ${viewport.width}`)
  }
  await page.setViewportSize(VIEWPORTS.laptop)
  assert.deepEqual(await axeViolations(page), [], `accessibility of ${name}`)
}

describe('dashboard', () => {
  before(async () => {
    mkdirSync(shots, { recursive: true })
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    })
  })
  after(async () => {
    await browser?.close()
    for (const s of await Sandbox.list(host().conn)) if (s.state === 'running') await Sandbox.kill(s.id, host().conn)
    const client = new ForkboxClient(host().conn)
    for (const s of await client.snapshots.list()) await client.snapshots.delete(s.id)
    await client.templates.delete('dash-tpl').catch(() => {})
  })

  it('a wrong key is refused with a clear error, and the page loads fast', async () => {
    const errors: string[] = []
    const page = await openPage(errors)
    const started = Date.now()
    await page.goto(host().conn.url)
    await page.getByLabel('API key').waitFor()
    const loadMs = Date.now() - started
    assert.ok(loadMs < 1000, `the sign-in page took ${loadMs} ms`)
    await look(page, 'signin')
    await page.getByLabel('API key').fill('fbx_not_a_key')
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('alert').filter({ hasText: 'UNAUTHENTICATED' }).waitFor()
    assert.equal(await page.getByRole('heading', { name: 'Sandboxes' }).count(), 0)
    // a key no header can carry is called malformed, not an unreachable server
    await page.getByLabel('API key').fill(`${host().conn.apiKey.slice(0, 8)}é${host().conn.apiKey.slice(8)}`)
    await page.getByRole('button', { name: 'Sign in' }).click()
    const malformed = page.getByRole('alert').filter({ hasText: 'malformed' })
    await malformed.waitFor()
    assert.match((await malformed.textContent()) ?? '', /character 9 is "é" \(U\+00E9\)/)
    assert.doesNotMatch((await malformed.textContent()) ?? '', /CONNECTION_ERROR/)
    await look(page, 'signin-malformed')
    // the browser itself reports the 401 it was answered as a console error: the only one allowed
    assert.deepEqual(
      errors.filter((e) => !/status of 401/.test(e)),
      [],
    )
    await page.close()
  })

  it('sign in, create, a terminal, a plotting cell, fork ×2 and kill, all seen live', async () => {
    const errors: string[] = []
    const page = await openPage(errors)
    await signIn(page, host().conn.apiKey)
    await page.getByRole('heading', { name: 'Sandboxes' }).waitFor()
    assert.equal(await page.getByRole('link', { name: 'API keys' }).count(), 1, 'the admin sees the keys page')

    // create: the new row appears by the events stream, no reload
    await page.getByRole('combobox', { name: 'Template', exact: true }).selectOption('code-interpreter')
    await page.getByRole('button', { name: 'Create sandbox' }).click()
    const row = page.locator('tr[data-sandbox]').first()
    await row.locator('[data-state="running"]').waitFor({ timeout: 60_000 })
    const id = await row.getAttribute('data-sandbox')
    assert.ok(id)
    await look(page, 'sandboxes')

    // its page: type in the terminal and read the answer off the screen
    await page.getByRole('link', { name: id }).click()
    await page.getByRole('heading', { name: id }).waitFor()
    await page.getByText('terminal 1: connected').waitFor({ timeout: 30_000 })
    await page.getByTestId('terminal 1').click()
    await page.keyboard.type('echo hello-$((40+2))\n')
    await page
      .getByTestId('terminal 1')
      .locator('.xterm-rows')
      .filter({ hasText: 'hello-42' })
      .waitFor({ timeout: 15_000 })
    // a second terminal in its own tab; the first keeps its screen
    await page.getByRole('button', { name: 'New terminal' }).click()
    await page.getByText('terminal 2: connected').waitFor({ timeout: 30_000 })
    await page.getByTestId('terminal 2').click()
    await page.keyboard.type('echo tab-$((1+1))\n')
    await page
      .getByTestId('terminal 2')
      .locator('.xterm-rows')
      .filter({ hasText: 'tab-2' })
      .waitFor({ timeout: 15_000 })
    await page.getByRole('tab', { name: 'Terminal 1' }).click()
    assert.match((await page.getByTestId('terminal 1').locator('.xterm-rows').textContent()) ?? '', /hello-42/)

    // the cell's default code plots: the figure shows inline
    await page.getByRole('button', { name: /^Run/ }).click()
    const figure = page.locator('.cell-output img')
    await figure.waitFor({ timeout: 60_000 })
    assert.match((await figure.getAttribute('src')) ?? '', /^data:image\/png;base64,iVBORw0KGgo/)
    // usage charts (once there are three samples, 5 s apart) and the event timeline are there
    await page.locator('section[aria-label="usage"] canvas').first().waitFor({ timeout: 30_000 })
    assert.equal(await page.locator('section[aria-label="usage"] figure').count(), 3)
    await page.locator('.timeline li').filter({ hasText: 'created' }).first().waitFor()

    // upload a file (the drop zone's file input), see it listed, download it: the same bytes
    const bytes = randomBytes(200_000)
    await page
      .getByLabel('upload files')
      .setInputFiles({ name: 'data.bin', mimeType: 'application/octet-stream', buffer: bytes })
    const listed = page.locator('li[data-file="data.bin"]')
    await listed.waitFor({ timeout: 30_000 })
    assert.match((await listed.textContent()) ?? '', /195\.3 KiB/)
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'download data.bin' }).click(),
    ])
    assert.ok(
      Buffer.from(readFileSync((await download.path()) as string)).equals(bytes),
      'the downloaded bytes are the uploaded ones',
    )
    // a background process's output, followed live
    const sbx = await Sandbox.connect(id, host().conn)
    await sbx.exec('for i in 1 2 3 4 5; do echo tick-$i; sleep 1; done', { background: true })
    const procs = page.getByRole('region', { name: 'background processes' })
    await procs.getByRole('button', { name: 'Refresh' }).click()
    await procs.getByRole('button', { name: 'Output' }).first().click()
    await procs.locator('pre').filter({ hasText: 'tick-3' }).waitFor({ timeout: 20_000 })

    // the network editor: exposing a port saves the policy and shows the port's link
    const network = page.getByRole('region', { name: 'network' })
    await network.getByLabel('Exposed ports').fill('8080')
    await network.getByRole('button', { name: 'Save network' }).click()
    await network.getByRole('link', { name: 'port 8080' }).waitFor()
    assert.deepEqual((await sbx.getInfo()).network.ports, [8080])
    await look(page, 'sandbox')

    // a cell that fails shows its traceback
    await page.getByLabel('code').fill('1 / 0')
    await page.getByRole('button', { name: /^Run/ }).click()
    await page.locator('.traceback').filter({ hasText: 'ZeroDivisionError' }).waitFor({ timeout: 30_000 })
    // interrupt a long cell: it stops, and the kernel (its variables) carries on
    await page.getByLabel('code').fill('import time\nkept = 41\ntime.sleep(60)')
    await page.getByRole('button', { name: /^Run/ }).click()
    await page.getByRole('button', { name: 'Interrupt' }).click()
    await page.getByRole('alert').filter({ hasText: 'Interrupted.' }).waitFor({ timeout: 10_000 })
    await page.getByLabel('code').fill('kept + 1')
    await page.getByRole('button', { name: /^Run/ }).click()
    await page.locator('.cell-output .result').filter({ hasText: '42' }).waitFor({ timeout: 30_000 })

    // back on the list: fork with count 2, both forks appear live
    await page.getByRole('link', { name: '← Sandboxes' }).click()
    await page.locator(`tr[data-sandbox="${id}"]`).waitFor()
    // its CPU and memory sparklines (the metrics endpoint samples every 5 s)
    await page.locator(`tr[data-sandbox="${id}"] svg[aria-label^="memory"]`).waitFor({ timeout: 30_000 })
    await page.getByLabel(`fork count for ${id}`).fill('2')
    await page.locator(`tr[data-sandbox="${id}"]`).getByRole('button', { name: 'Fork' }).click()
    await page.waitForFunction(
      () => document.querySelectorAll('tr[data-sandbox] [data-state="running"]').length >= 3,
      undefined,
      { timeout: 60_000 },
    )
    const forks = (
      await page.locator('tr[data-sandbox]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-sandbox')))
    ).filter((s): s is string => s !== null && s !== id)
    assert.equal(forks.length, 2)

    // snapshot the original from the list: the Snapshots page lists it
    await page.locator(`tr[data-sandbox="${id}"]`).getByRole('button', { name: 'Snapshot' }).click()
    const client = new ForkboxClient(host().conn)
    await until('the snapshot is taken', async () => (await client.snapshots.list()).length === 1)
    // and the page says so, naming the snapshot
    const [snapshot] = await client.snapshots.list()
    await page
      .getByRole('status')
      .filter({ hasText: `Snapshot ${snapshot?.id} taken of ${id}` })
      .waitFor({ timeout: 10_000 })

    // kill one fork from the list: it leaves the running ones without a reload, and shows as killed
    // among the ended
    const fork = page.locator(`tr[data-sandbox="${forks[0]}"]`)
    await fork.getByRole('button', { name: 'Kill' }).click()
    await fork.waitFor({ state: 'detached', timeout: 30_000 })
    await page.getByLabel(/Show ended/).check()
    await fork.locator('[data-state="killed"]').waitFor({ timeout: 30_000 })
    await page.getByLabel(/Show ended/).uncheck()
    assert.equal((await Sandbox.connect(forks[0] as string, host().conn).then((s) => s.getInfo())).state, 'killed')

    // a template of this key's: its build and the build's log are on the Templates page
    const built = await new ForkboxClient(host().conn).templates.build({
      name: 'dash-tpl',
      dockerfile: 'FROM forkbox:base\nRUN echo building-step-one\n',
    })
    assert.equal(built.status, 'ready')

    // the list pages: templates, snapshots, and the key's events (past then live)
    for (const heading of ['Templates', 'Snapshots', 'Events']) {
      await page.getByRole('link', { name: heading, exact: true }).click()
      await page.getByRole('heading', { name: heading }).waitFor()
      if (heading === 'Templates') {
        await page.getByRole('cell', { name: 'code-interpreter' }).first().waitFor()
        // a template not built yet is built by the first sandbox of it: nothing is "building"
        assert.equal(await page.getByRole('cell', { name: 'building', exact: true }).count(), 0)
        await page
          .getByRole('row', { name: /dash-tpl/ })
          .getByRole('button', { name: 'Builds' })
          .click()
        await page.getByRole('button', { name: 'version 1' }).click()
        await page
          .getByRole('region', { name: /^log of build/ })
          .filter({ hasText: 'building-step-one' })
          .waitFor()
      }
      if (heading === 'Events') await page.getByRole('cell', { name: 'killed' }).first().waitFor()
      if (heading === 'Snapshots') await page.getByRole('button', { name: 'Start sandbox' }).waitFor()
      await look(page, heading.toLowerCase())
    }

    // the admin's keys page
    await page.getByRole('link', { name: 'API keys' }).click()
    await page.getByRole('heading', { name: 'API keys' }).waitFor()
    await look(page, 'keys')
    assert.deepEqual(errors, [])
    await page.close()
  })

  it('a key that is not the admin key does not see the keys page, and signs out', async () => {
    const tenant = await new ForkboxClient(host().conn).keys.create('dashboard-tenant')
    const errors: string[] = []
    const page = await openPage(errors)
    await signIn(page, tenant.key)
    await page.getByRole('heading', { name: 'Sandboxes' }).waitFor()
    assert.equal(await page.getByRole('link', { name: 'API keys' }).count(), 0)
    await page.goto(`${host().conn.url}/#/keys`)
    await page.getByRole('heading', { name: 'Sandboxes' }).waitFor()
    assert.equal(await page.getByRole('heading', { name: 'API keys' }).count(), 0)
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByLabel('API key').waitFor()
    // the key is gone from the tab: a reload asks for it again
    await page.reload()
    await page.getByLabel('API key').waitFor()
    // signing in asks only what any key may read (its own record): nothing refused, nothing logged
    assert.deepEqual(errors, [])
    await page.close()
  })

  it("an unknown id after a sandbox's page shows a not-found and nothing of the sandbox before", async () => {
    const a = await Sandbox.create({ ...host().conn, template: 'code-interpreter', ttlSeconds: 600 })
    const errors: string[] = []
    const page = await openPage(errors)
    // a memory that barely changes (135.275 to 135.285 MiB): its axis labels keep every digit
    await page.route(`**/v1/sandboxes/${a.id}/metrics`, (route) => {
      const now = Date.now()
      const samples = Array.from({ length: 8 }, (_, i) => ({
        at: new Date(now - (7 - i) * 5000).toISOString(),
        cpuSeconds: i * 0.01,
        memoryBytes: Math.round((135.275 + (i % 3) * 0.005) * 1024 ** 2),
        networkRxBytes: 0,
        networkTxBytes: 0,
      }))
      return route.fulfill({ json: { samples, diskBytes: null, diskLimitBytes: 1024 ** 3 } })
    })
    await signIn(page, host().conn.apiKey)
    await page.getByRole('heading', { name: 'Sandboxes' }).waitFor()
    await page.goto(`${host().conn.url}/#/sandbox/${a.id}`)
    await page.getByText('terminal 1: connected').waitFor({ timeout: 30_000 })
    const memory = page.getByRole('img', { name: 'Memory over time' })
    await page.waitForFunction(() => document.querySelector('[aria-label="Memory over time"][data-y-labels]'))
    const labels = ((await memory.getAttribute('data-y-labels')) ?? '').split(' ')
    assert.ok(labels.length >= 2, `memory axis labels: ${labels}`)
    for (const label of labels) assert.match(label, /^13[45](\.\d+)?$/, `memory axis labels: ${labels}`)
    assert.equal(new Set(labels).size, labels.length, `memory axis labels: ${labels}`)
    await page.locator('section[aria-label="usage"]').screenshot({ path: join(shots, 'chart-flat-memory.png') })

    // the same tab goes to an id that does not exist: a not-found, and nothing of A to act on
    await page.goto(`${host().conn.url}/#/sandbox/sbx-00000000000000000000`)
    await page.getByRole('heading', { name: 'sbx-00000000000000000000' }).waitFor()
    await page.getByRole('alert').filter({ hasText: 'SANDBOX_NOT_FOUND' }).waitFor()
    for (const name of ['Kill', 'Hibernate', 'Snapshot', 'Fork', 'Run'])
      assert.equal(await page.getByRole('button', { name, exact: true }).count(), 0, `a ${name} button`)
    assert.equal(await page.getByTestId('terminal 1').count(), 0, 'a terminal')
    assert.equal(await page.getByLabel('upload files').count(), 0, 'a file browser')
    assert.equal(await page.locator('[data-state]').count(), 0, 'a state')
    assert.equal(await page.getByText(a.id).count(), 0, "A's id")
    await look(page, 'sandbox-not-found')
    assert.equal((await a.getInfo()).state, 'running')
    // the browser logs the not-found answer itself: the only error allowed
    assert.deepEqual(
      errors.filter((e) => !/status of 404/.test(e)),
      [],
    )
    await page.close()
    await a.kill()
  })

  it('the list: actions in reach at a phone and with long metadata, ended sandboxes behind a filter', async () => {
    const meta = { note: 'x'.repeat(50) }
    const live = await Sandbox.create({ ...host().conn, template: 'code-interpreter', metadata: meta })
    const dead = await Sandbox.create({ ...host().conn, template: 'code-interpreter', metadata: meta })
    await dead.kill()
    const errors: string[] = []
    const page = await openPage(errors)
    await signIn(page, host().conn.apiKey)
    await page.getByRole('heading', { name: 'Sandboxes' }).waitFor()
    const row = page.locator(`tr[data-sandbox="${live.id}"]`)
    await row.locator('[data-state="running"]').waitFor()
    // the killed one is not in the default list; the filter shows it, after the running ones
    assert.equal(await page.locator(`tr[data-sandbox="${dead.id}"]`).count(), 0)
    for (const [size, viewport] of Object.entries(VIEWPORTS)) {
      await page.setViewportSize(viewport)
      // scroll the page (never sideways) to the row, then every action is on the screen
      await row.evaluate((el) => window.scrollTo(0, el.getBoundingClientRect().top + window.scrollY - 80))
      assert.equal(await page.evaluate(() => window.scrollX), 0)
      assert.equal(await page.locator('section.table-wrap').evaluate((el) => el.scrollLeft), 0)
      for (const name of ['Fork', 'Hibernate', 'Snapshot', 'Kill']) {
        const button = row.getByRole('button', { name, exact: true })
        assert.ok(await button.isVisible(), `${name} at ${size}`)
        const box = await button.boundingBox()
        assert.ok(box, `${name} at ${size}`)
        assert.ok(
          box.x >= 0 && box.y >= 0 && box.x + box.width <= viewport.width && box.y + box.height <= viewport.height,
          `${name} at ${size} is at ${JSON.stringify(box)}`,
        )
        // and nothing covers it: a click there lands on it
        const hit = await button.evaluate((el) => {
          const r = el.getBoundingClientRect()
          return el.contains(document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2))
        })
        assert.ok(hit, `${name} at ${size} is covered`)
      }
      // the id reads on one line
      const link = await row.getByRole('link', { name: live.id }).boundingBox()
      assert.ok(link && link.height < 30, `the id at ${size} is ${link?.height} px tall`)
    }
    await page.setViewportSize(VIEWPORTS.laptop)
    await look(page, 'sandboxes-long-metadata')
    await page.getByLabel(/Show ended/).check()
    await page.locator(`tr[data-sandbox="${dead.id}"] [data-state="killed"]`).waitFor()
    const states = await page
      .locator('tr[data-sandbox] [data-state]')
      .evaluateAll((els) => els.map((e) => e.getAttribute('data-state')))
    assert.equal(states[0], 'running', `the list's order: ${states}`)
    assert.ok(states.indexOf('killed') > states.lastIndexOf('running'), `the list's order: ${states}`)
    await look(page, 'sandboxes-ended')
    assert.deepEqual(errors, [])
    await page.close()
    await live.kill()
  })
})
