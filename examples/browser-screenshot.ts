// A live browser per sandbox: the `browser` template is baked with headless Chromium running, so a
// create is a restore of a browser that is already up. Its DevTools endpoint (CDP) is an exposed
// port: drive it from here with playwright-core, as below, or from inside the sandbox with the
// template's own playwright-core (`CDP_URL` names the endpoint there).
//
//   forkbox up                                                # once
//   node --import tsx examples/browser-screenshot.ts [page.png]
import { writeFileSync } from 'node:fs'
import { Sandbox } from '@forkbox/sdk'
import { chromium } from 'playwright-core'

const out = process.argv[2] ?? 'page.png'
const started = performance.now()
await using sbx = await Sandbox.create({ template: 'browser', ttlSeconds: 300 })

// a page served from inside the sandbox, on its loopback only: the browser there reaches it
await sbx.files.write(
  '/home/user/site/index.html',
  `<!doctype html><title>forkbox</title>
<h1>hello from a sandbox</h1>
<button id="go" onclick="document.getElementById('out').textContent = 'clicked in ' + navigator.userAgent.split(' ').find((w) => w.startsWith('HeadlessChrome'))">go</button>
<p id="out">not clicked yet</p>`,
)
await sbx.exec('python3 -m http.server 8000 --bind 127.0.0.1 --directory /home/user/site', { background: true })
await sbx.exec(
  'for i in $(seq 100); do curl -sf -o /dev/null http://127.0.0.1:8000/ && exit 0; sleep 0.05; done; exit 1',
)

// CDP over the exposed port 9222; the sandbox's access token (or the API key) lets us in
const browser = await chromium.connectOverCDP(`http://${sbx.getHost(9222)}`, {
  headers: { 'X-Forkbox-Access-Token': sbx.accessToken },
})
try {
  const context = browser.contexts()[0] ?? (await browser.newContext())
  const page = await context.newPage()
  await page.goto('http://127.0.0.1:8000/')
  await page.click('#go')
  console.log(`clicked: ${await page.textContent('#out')}`)
  const png = await page.screenshot()
  writeFileSync(out, png)
  console.log(`screenshot: ${out}, ${png.length} bytes, ${(performance.now() - started).toFixed(0)} ms after create`)
  await page.close()
} finally {
  await browser.close()
}
