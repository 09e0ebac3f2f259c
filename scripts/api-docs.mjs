// The API reference of the SDKs, generated from their code, and a check of its links:
//   node scripts/api-docs.mjs [OUT_DIR]        (default: .api-docs, not committed)
// OUT_DIR/ts: typedoc of @forkbox/sdk and @forkbox/ai (a broken {@link} fails the build);
// OUT_DIR/python: pydoc of the Python SDK's public modules. Then every relative link and anchor
// in the generated pages, and every relative link in the repository's Markdown docs, must resolve.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))

const TS_ENTRIES = [
  'packages/sdk/src/index.ts',
  'packages/ai/src/index.ts',
  'packages/ai/src/vercel.ts',
  'packages/ai/src/openai-agents.ts',
  'packages/ai/src/langchain.ts',
]
/** The Python package and each of its modules (the package page links them all, private ones too). */
function pythonModules() {
  const dir = join(root, 'python/forkbox')
  const modules = readdirSync(dir).filter((f) => f.endsWith('.py') && f !== '__init__.py')
  return ['forkbox', ...modules.map((f) => `forkbox.${f.slice(0, -3)}`)]
}

function run(cmd, args, options) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', ...options })
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed:\n${r.stdout}${r.stderr}`)
  return r
}

export function buildTypeScriptDocs(out) {
  const typedoc = join(root, 'node_modules/typedoc/bin/typedoc')
  const entries = TS_ENTRIES.flatMap((e) => ['--entryPoints', join(root, e)])
  run(
    process.execPath,
    [
      typedoc,
      ...entries,
      '--tsconfig',
      join(root, 'tsconfig.json'),
      '--out',
      out,
      '--name',
      'forkbox TypeScript API',
      '--readme',
      'none',
      '--disableSources',
      '--excludeInternal',
      '--treatWarningsAsErrors',
      '--logLevel',
      'Warn',
    ],
    { cwd: root },
  )
}

export function buildPythonDocs(out) {
  mkdirSync(out, { recursive: true })
  // the SDK's own venv (httpx, httpx-sse): pydoc imports the modules it documents
  const python = run('bash', [join(root, 'scripts/python-venv.sh')]).stdout.trim()
  run(python, ['-m', 'pydoc', '-w', ...pythonModules()], {
    cwd: out,
    env: { ...process.env, PYTHONPATH: join(root, 'python'), PYTHONDONTWRITEBYTECODE: '1' },
  })
}

function* files(dir, suffix) {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name.startsWith('.')) continue
    const p = join(dir, name)
    if (statSync(p).isDirectory()) yield* files(p, suffix)
    else if (name.endsWith(suffix)) yield p
  }
}

/** The ids and names an HTML page's anchors can point at. */
function anchorsOf(html) {
  const found = new Set()
  for (const m of html.matchAll(/\s(?:id|name)="([^"]+)"/g)) found.add(m[1])
  return found
}

function isExternal(link) {
  return /^[a-z][a-z0-9+.-]*:/i.test(link) || link.startsWith('//')
}

/**
 * Broken relative links (and anchors) in the HTML under `dir`. `inScope(target, fragment)` says
 * which are ours to check: pydoc links every stdlib module it mentions, which it did not write,
 * and the private base classes it leaves out of its pages by design.
 */
export function brokenHtmlLinks(dir, inScope = () => true) {
  const broken = []
  const anchors = new Map()
  const anchorsFor = (file) => {
    if (!anchors.has(file)) anchors.set(file, anchorsOf(readFileSync(file, 'utf8')))
    return anchors.get(file)
  }
  for (const file of files(dir, '.html')) {
    const html = readFileSync(file, 'utf8')
    for (const m of html.matchAll(/\s(?:href|src)="([^"]*)"/g)) {
      const link = m[1].replaceAll('&amp;', '&')
      if (link === '' || isExternal(link)) continue
      const [path, fragment] = link.split('#', 2)
      const target = path ? resolve(dirname(file), decodeURIComponent(path.split('?')[0])) : file
      if (!inScope(target, fragment)) continue
      const where = `${relative(dir, file)} -> ${link}`
      if (!existsSync(target)) broken.push(where)
      else if (fragment && target.endsWith('.html') && !anchorsFor(target).has(decodeURIComponent(fragment)))
        broken.push(`${where} (no such anchor)`)
    }
  }
  return broken
}

/** Broken relative links in Markdown files: targets that do not exist. */
export function brokenMarkdownLinks(markdownFiles) {
  const broken = []
  for (const file of markdownFiles) {
    const text = readFileSync(file, 'utf8')
      .replace(/```[\s\S]*?```/g, '')
      .replace(/`[^`\n]*`/g, '')
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const link = m[1]
      if (isExternal(link) || link.startsWith('#')) continue
      const target = resolve(dirname(file), decodeURIComponent(link.split('#')[0]))
      if (!existsSync(target)) broken.push(`${relative(root, file)} -> ${link}`)
    }
  }
  return broken
}

export function repositoryMarkdown() {
  const docs = [...files(join(root, 'docs'), '.md')]
  const readmes = [
    'README.md',
    'CHANGELOG.md',
    'packages/sdk/README.md',
    'packages/ai/README.md',
    'apps/cli/README.md',
    'python/README.md',
  ]
  return [...docs, ...readmes.map((f) => join(root, f)).filter((f) => existsSync(f))]
}

export function buildApiDocs(out) {
  rmSync(out, { recursive: true, force: true })
  buildTypeScriptDocs(join(out, 'ts'))
  buildPythonDocs(join(out, 'python'))
  const python = join(out, 'python')
  return [
    ...brokenHtmlLinks(join(out, 'ts')),
    ...brokenHtmlLinks(
      python,
      (target, fragment) => relative(python, target).startsWith('forkbox') && !fragment?.startsWith('_'),
    ),
    ...brokenMarkdownLinks(repositoryMarkdown()),
  ]
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const out = resolve(process.argv[2] ?? join(root, '.api-docs'))
  const broken = buildApiDocs(out)
  if (broken.length > 0) {
    console.error(`${broken.length} broken links:\n${broken.join('\n')}`)
    process.exit(1)
  }
  console.log(`API docs in ${out} (ts/index.html, python/forkbox.html); no broken links`)
}
