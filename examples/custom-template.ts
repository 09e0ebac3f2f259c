// Bring your own environment: a Dockerfile and its context become a template (built in gVisor,
// layer by layer, logged as it goes), and a sandbox from it starts with its server already up.
//
//   forkbox up                                                # once
//   node --import tsx examples/custom-template.ts [NAME]
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Sandbox, Template } from '@forkbox/sdk'

const name = process.argv[2] ?? 'hello-site'
const context = mkdtempSync(join(tmpdir(), 'forkbox-example-'))
try {
  mkdirSync(join(context, 'site'))
  writeFileSync(join(context, 'site/index.html'), '<h1>hello from a forkbox template</h1>\n')
  writeFileSync(
    join(context, 'Dockerfile'),
    `FROM forkbox:base
COPY site/ /srv/site/
ENV GREETING="built with forkbox"
WORKDIR /srv/site
EXPOSE 8000
CMD ["python3", "-m", "http.server", "8000"]
`,
  )
  const build = await Template.build({
    name,
    context,
    onLog: (line) => console.log(`  ${line.step ? `[${line.step}] ` : ''}${line.message}`),
  })
  console.log(`built ${build.template}@${build.version}`)

  await using sbx = await Sandbox.create({ template: name })
  const greeting = await sbx.exec('echo "$GREETING in $(pwd)"')
  console.log(greeting.stdout.trim())
  // the server was running when the template was baked: it answers right away
  const page = await fetch(`http://${sbx.getHost(8000)}/`, { headers: { 'x-forkbox-access-token': sbx.accessToken } })
  console.log(`GET / → ${page.status}: ${(await page.text()).trim()}`)
} finally {
  rmSync(context, { recursive: true, force: true })
}
