// Runs the test suite: unit tests, then (unless `unit` is given) the end-to-end tests on real runsc.
import { spawnSync } from 'node:child_process'
import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'

const only = process.argv[2]
const root = new URL('..', import.meta.url).pathname

function find(dir, out = []) {
  let entries = []
  try {
    entries = readdirSync(dir)
  } catch {
    return out
  }
  for (const name of entries) {
    if (name === 'node_modules') continue
    const p = join(dir, name)
    if (statSync(p).isDirectory()) find(p, out)
    else if (name.endsWith('.test.ts')) out.push(p)
  }
  return out
}

function run(label, args) {
  console.log(`\n# ${label}`)
  const r = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' })
  if (r.status !== 0) {
    console.error(`# ${label} failed`)
    process.exit(r.status ?? 1)
  }
}

const unit = [
  ...['packages', 'apps'].flatMap((d) => readdirSync(join(root, d)).map((p) => join(root, d, p, 'test'))),
].flatMap((d) => find(d))
const e2e = find(join(root, 'tests'))

if (only !== 'e2e') {
  run('typecheck', [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json', '--noEmit'])
  run('lint', [join(root, 'node_modules/@biomejs/biome/bin/biome'), 'check', '.'])
  run('guest typecheck', [join(root, 'node_modules/pyright/index.js'), '-p', join(root, 'pyrightconfig.json')])
}
if (only !== 'e2e' && unit.length) run('unit tests', ['--import', 'tsx', '--test', ...unit])
if (only !== 'e2e') {
  // the guest (Python, stdlib only): its tests import the package from apps/guest
  console.log('\n# guest unit tests')
  const guest = join(root, 'apps/guest')
  const r = spawnSync('python3', ['-m', 'unittest', 'discover', '-s', join(guest, 'tests'), '-t', guest], {
    cwd: guest,
    stdio: 'inherit',
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
  })
  if (r.status !== 0) {
    console.error('# guest unit tests failed')
    process.exit(r.status ?? 1)
  }
}
if (only !== 'unit' && e2e.length) {
  run('template build', ['--import', 'tsx', join(root, 'tests/e2e/prepare.ts')])
  run('end-to-end tests (real runsc)', ['--import', 'tsx', '--test', '--test-concurrency=1', ...e2e])
}
