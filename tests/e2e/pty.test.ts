// Terminals on real runsc: bash on a pty over a WebSocket, resize, ^C, several at once.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { describe, it } from 'node:test'
import { type PtyHandle, Sandbox } from '@forkbox/sdk'
import WebSocket from 'ws'
import { useTestHost } from './harness.ts'

const host = useTestHost()

/** Collects a terminal's output; `until` waits for a pattern in what came after `from`. */
function screen() {
  let text = ''
  const decoder = new TextDecoder()
  return {
    onData: (d: Uint8Array) => {
      text += decoder.decode(d, { stream: true })
    },
    get text() {
      return text
    },
    async until(pattern: RegExp, from = 0, timeoutMs = 15_000): Promise<RegExpMatchArray> {
      const deadline = Date.now() + timeoutMs
      while (Date.now() < deadline) {
        const m = text.slice(from).match(pattern)
        if (m) return m
        await new Promise((r) => setTimeout(r, 50))
      }
      throw new Error(`no ${pattern} in terminal output:\n${text.slice(from)}`)
    },
  }
}

describe('pty', () => {
  it('runs bash; tput cols follows a resize; ^C interrupts sleep; exit ends it', async () => {
    await using sbx = await Sandbox.create(host().conn)
    const s = screen()
    const term: PtyHandle = await sbx.pty.create({ cols: 100, rows: 30, onData: s.onData })
    assert.ok(term.pid > 0)
    term.sendInput('echo "cols=$(tput cols) rows=$(tput lines)"\n')
    await s.until(/cols=100 rows=30/)
    term.resize(132, 40)
    let mark = s.text.length
    term.sendInput('echo "now=$(tput cols)x$(tput lines)"\n')
    await s.until(/now=132x40/, mark)
    mark = s.text.length
    const started = Date.now()
    term.sendInput('sleep 100\n')
    await new Promise((r) => setTimeout(r, 800))
    term.sendInput('\x03')
    // the interrupted sleep's status, in the shell that got its prompt back
    term.sendInput('echo "status=$?"\n')
    await s.until(/status=130/, mark, 5000)
    assert.ok(Date.now() - started < 10_000)
    term.sendInput('exit 7\n')
    assert.deepEqual(await term.wait(), { exitCode: 7, signal: null })
  })

  it('several terminals run side by side; binary-safe output; a refused key gets no terminal', async () => {
    await using sbx = await Sandbox.create(host().conn)
    const a = screen()
    const b = screen()
    const [ta, tb] = await Promise.all([
      sbx.pty.create({ cmd: 'printf "\\xff\\xfe A\\n"; read line; echo "a got $line"', onData: a.onData }),
      sbx.pty.create({ cmd: 'read line; echo "b got $line"', onData: b.onData }),
    ])
    tb.sendInput('two\n')
    ta.sendInput('one\n')
    await a.until(/a got one/)
    await b.until(/b got two/)
    assert.ok(a.text.includes('\ufffd\ufffd A'), JSON.stringify(a.text))
    assert.equal((await ta.wait()).exitCode, 0)
    assert.equal((await tb.wait()).exitCode, 0)
    // no terminal without the owner's key
    const status = await new Promise<number>((resolve, reject) => {
      const ws = new WebSocket(`${host().conn.url.replace('http', 'ws')}/v1/sandboxes/${sbx.id}/pty?key=fbx_nope`)
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0))
      ws.on('open', () => reject(new Error('a bad key opened a terminal')))
      ws.on('error', () => {})
    })
    assert.equal(status, 401)
  })

  it('forkbox shell runs a program on a terminal and exits with its code', async () => {
    await using sbx = await Sandbox.create(host().conn)
    const cli = new URL('../../apps/cli/bin/forkbox.mjs', import.meta.url).pathname
    const child = spawn(
      process.execPath,
      [cli, 'shell', sbx.id, '--', 'bash', '-c', 'read x; echo "got $x on $(tty)"; exit 3'],
      {
        env: { ...process.env, FORKBOX_URL: host().conn.url, FORKBOX_API_KEY: host().conn.apiKey },
        stdio: ['pipe', 'pipe', 'inherit'],
      },
    )
    let out = ''
    child.stdout.on('data', (d) => {
      out += d
    })
    child.stdin.write('hello\r')
    const code = await new Promise((r) => child.on('close', r))
    assert.equal(code, 3)
    assert.match(out, /got hello on \/dev\/pts\/\d+/)
  })
})
