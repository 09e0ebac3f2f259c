// The code kernels the guest runs (forkbox_kernel.py for python and bash, forkbox_kernel.cjs for
// javascript), on this machine's interpreters and the kernels' own line protocol: results show as
// E2B's interpreter shows them, a cell's env is the cell's only, ES module imports work.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'

const GUEST = new URL('../../guest/', import.meta.url).pathname
const cwd = mkdtempSync(join(tmpdir(), 'fbx-kernels-'))
after(() => rmSync(cwd, { recursive: true, force: true }))

interface Message {
  t: string
  name?: string
  text?: string
  main?: boolean
  data?: Record<string, unknown>
  error?: { name: string; value: string } | null
}

/** A kernel process and a function running one cell on it: the messages up to its `done`. */
function kernel(language: 'python' | 'bash' | 'javascript' | 'typescript') {
  const argv =
    language === 'javascript' || language === 'typescript'
      ? [process.execPath, join(GUEST, 'forkbox_kernel.cjs'), language]
      : ['/usr/bin/python3', join(GUEST, 'forkbox_kernel.py'), language]
  const proc: ChildProcess = spawn(argv[0] as string, argv.slice(1), {
    cwd,
    stdio: ['pipe', 'inherit', 'inherit', 'pipe'],
    env: { PATH: process.env.PATH, HOME: cwd, LANG: 'C.UTF-8' },
  })
  let buf = ''
  let cell: Message[] = []
  const waiting: ((m: Message[]) => void)[] = []
  proc.stdio[3]?.on('data', (d: Buffer) => {
    buf += d.toString()
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const m = JSON.parse(buf.slice(0, i)) as Message
      buf = buf.slice(i + 1)
      if (m.t === 'ready') continue
      cell.push(m)
      if (m.t === 'done') {
        const done = cell
        cell = []
        waiting.shift()?.(done)
      }
    }
  })
  return {
    run(code: string, env?: Record<string, string>): Promise<Message[]> {
      return new Promise((resolve) => {
        waiting.push(resolve)
        proc.stdin?.write(`${JSON.stringify({ code, env })}\n`)
      })
    },
    close() {
      proc.stdin?.end()
    },
  }
}

const mainText = (ms: Message[]) => ms.find((m) => m.t === 'display' && m.main)?.data?.text
const stdout = (ms: Message[]) =>
  ms
    .filter((m) => m.t === 'stream' && m.name === 'stdout')
    .map((m) => m.text)
    .join('')

describe('code kernels', () => {
  it('python: a string result is its text as it is (no quotes); other values their repr', async () => {
    const k = kernel('python')
    try {
      assert.equal(mainText(await k.run("'bar'")), 'bar')
      assert.equal(mainText(await k.run('import os; os.getcwd()')), cwd)
      assert.equal(mainText(await k.run("['a', 1]")), "['a', 1]")
      assert.equal(mainText(await k.run('6 * 7')), '42')
    } finally {
      k.close()
    }
  })

  it("python: an image's show() and save() display it, imported in the same cell (a stand-in PIL here)", async () => {
    // the real PIL is in the code-interpreter template (e2e); this one saves fixed bytes
    mkdirSync(join(cwd, 'PIL'), { recursive: true })
    writeFileSync(join(cwd, 'PIL', '__init__.py'), '')
    writeFileSync(
      join(cwd, 'PIL', 'Image.py'),
      [
        'class Image:',
        '    def save(self, fp, format=None, **params):',
        '        data = b"\\x89PNG-" + (format or "file").encode()',
        '        if isinstance(fp, str):',
        '            open(fp, "wb").write(data)',
        '        else:',
        '            fp.write(data)',
        '    def show(self):',
        '        raise RuntimeError("no display")',
        '    def __repr__(self):',
        '        return "<image>"',
        '',
      ].join('\n'),
    )
    const k = kernel('python')
    const pngs = (ms: Message[]) =>
      ms
        .filter((m) => m.t === 'display' && !m.main)
        .map((m) => Buffer.from(String(m.data?.png), 'base64').toString('latin1'))
    try {
      const saved = await k.run('from PIL import Image\nimg = Image.Image()\nimg.save("out.png")')
      assert.deepEqual(pngs(saved), ['\x89PNG-PNG'])
      assert.equal(readFileSync(join(cwd, 'out.png'), 'latin1'), '\x89PNG-file')
      const shown = await k.run('img.show()')
      assert.deepEqual(pngs(shown), ['\x89PNG-PNG'])
      assert.equal(shown.at(-1)?.error, null)
      // a library saving through PIL (matplotlib's savefig does) shows nothing
      mkdirSync(join(cwd, 'matplotlib'), { recursive: true })
      writeFileSync(join(cwd, 'matplotlib', '__init__.py'), 'def savefig(img, path):\n    img.save(path)\n')
      assert.deepEqual(pngs(await k.run('import matplotlib\nmatplotlib.savefig(img, "lib.png")')), [])
    } finally {
      k.close()
    }
  })

  it("bash: a cell's env is gone after it; a value the shell had before comes back", async () => {
    const k = kernel('bash')
    // bash writes to the kernel's own fd 1: each check is a cell's exit status
    const ok = async (code: string, env?: Record<string, string>) => (await k.run(code, env)).at(-1)?.error ?? null
    const unset = '[ -z "$' + '{FOO+set}" ]'
    try {
      assert.equal(await ok('[ "$FOO" = bar ] && [ "$(printenv FOO)" = bar ]', { FOO: 'bar' }), null)
      assert.equal(await ok(unset), null)
      assert.equal(await ok(unset, {}), null)
      await k.run('export FOO=mine')
      assert.equal(await ok('[ "$FOO" = cell ]', { FOO: 'cell' }), null)
      assert.equal(await ok('[ "$FOO" = mine ] && [ "$(printenv FOO)" = mine ]'), null)
      // the check can fail
      assert.equal((await ok('[ "$FOO" = other ]'))?.name, 'NonZeroExit')
    } finally {
      k.close()
    }
  })

  it("typescript: types are taken out, nothing else changes (the repo's typescript module here, Debian's in the template)", async () => {
    const k = kernel('typescript')
    try {
      const hello = await k.run('const message: string = "Hello World!"; console.log(message)')
      assert.equal(stdout(hello), 'Hello World!\n')
      assert.equal(hello.at(-1)?.error, null)
      assert.equal(mainText(await k.run('interface P { x: number }\nconst p: P = { x: 2 }\np.x * 21')), '42')
      // names persist between cells, as in javascript
      assert.equal(mainText(await k.run('message.length as number')), '12')
      const imported = await k.run(
        "import { join } from 'node:path'\nimport type { ParsedPath } from 'node:path'\njoin('a', 'b')",
      )
      assert.equal(mainText(imported), 'a/b')
      assert.equal(mainText(await k.run('await Promise.resolve<number>(7)')), '7')
    } finally {
      k.close()
    }
  })

  it('javascript: ES module imports, an awaited last expression as the result, strings as they are', async () => {
    const k = kernel('javascript')
    try {
      const imported = await k.run(
        "import fs from 'node:fs'\nimport { join as j } from 'node:path'\nimport * as os from 'node:os'\ntypeof fs.readFileSync + j('a', 'b')",
      )
      assert.equal(mainText(imported), 'functiona/b')
      // the imported names stay for later cells
      assert.equal(mainText(await k.run('typeof os.cpus')), 'function')
      assert.equal(mainText(await k.run("await Promise.resolve('Hello World!')")), 'Hello World!')
      assert.equal(mainText(await k.run('const x = await Promise.resolve(2)\nx * 21 // the answer')), '42')
      assert.equal(mainText(await k.run('process.cwd()')), cwd)
      assert.equal(mainText(await k.run("({ a: 'b' })")), "{ a: 'b' }")
      // a last line that is no expression: no result, the cell still runs
      const stmt = await k.run('const y = await Promise.resolve(3);\nconsole.log(y)')
      assert.equal(stdout(stmt), '3\n')
      assert.equal(mainText(stmt), undefined)
      const bad = await k.run("import nothing from 'no-such-module-here'")
      assert.match(bad.at(-1)?.error?.value ?? '', /no-such-module-here/)
    } finally {
      k.close()
    }
  })
})
