// The long-lived nft writer against the real nft, on scratch tables of this test: the rules it
// writes are those `nft -f` writes, a failing batch changes nothing, and a lost writer is replaced.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { addSlotScript, baseScript, policyScript } from '../src/network/firewall.ts'
import { NftWriter, oneLine } from '../src/network/nft.ts'

const hasNft = (() => {
  try {
    execFileSync('nft', ['list', 'tables'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
})()

const tag = `fbxtest${process.pid}`
const dir = mkdtempSync(join(tmpdir(), 'forkbox-nft-test-'))
const tables: string[] = []

function table(name: string): string {
  const t = `${tag}_${name}`
  tables.push(t)
  return t
}

const listTable = (t: string) => execFileSync('nft', ['list', 'table', 'inet', t]).toString()
const tableExists = (t: string) => execFileSync('nft', ['list', 'tables']).toString().includes(`inet ${t}\n`)
const nftFile = (script: string) => execFileSync('nft', ['-f', '-'], { input: script })

/** A stand-in for nft whose interactive mode misbehaves as `interactive` says (one-shot runs are the real nft). */
function fakeNft(name: string, interactive: string): string {
  const path = join(dir, name)
  writeFileSync(path, `#!/bin/sh\nif [ "$1" = "-i" ]; then\n${interactive}\nfi\nexec nft "$@"\n`)
  chmodSync(path, 0o755)
  return path
}

/** A whole sandbox's rules: the agent's table, a slot, an allow-listed policy. */
function sandboxRules(t: string): string[] {
  const names = { table: t, ifacePrefix: 'fxq' }
  return [
    baseScript({ ...names, subnet: '10.251.0.0/16', hostBlocks: ['192.0.2.2/32'], operatorAllowed: [], dnsPort: 5300 }),
    addSlotScript(names, 3, 'fxq3', '10.251.0.14'),
    policyScript(names, {
      slot: 3,
      iface: 'fxq3',
      address: '10.251.0.14',
      internet: true,
      allowCidrs: ['203.0.113.0/24'],
      denyCidrs: ['198.51.100.0/24'],
      allowResolved: ['198.51.100.7'],
      denyResolved: [],
      allowListed: true,
      generation: 7,
    }),
  ]
}

after(() => {
  for (const t of tables) if (hasNft && tableExists(t)) nftFile(`delete table inet ${t}\n`)
  rmSync(dir, { recursive: true, force: true })
})

describe('nft writer', { skip: !hasNft && 'needs nft (and root)' }, () => {
  it('writes exactly the rules nft -f writes', async () => {
    const viaWriter = table('w')
    const viaFile = table('f')
    const nft = new NftWriter()
    for (const s of sandboxRules(viaWriter)) await nft.run(s)
    await nft.close()
    for (const s of sandboxRules(viaFile)) nftFile(s)
    const a = listTable(viaWriter).replaceAll(viaWriter, 'T')
    assert.match(a, /ip daddr != @allow3 ip daddr != @allowdns3 goto refuse/)
    assert.equal(a, listTable(viaFile).replaceAll(viaFile, 'T'))
  })

  it("a failing batch changes nothing, says nft's error, and the next batch runs", async () => {
    const t = table('fail')
    const nft = new NftWriter()
    await assert.rejects(
      nft.run(`add table inet ${t}\nadd chain inet ${t} c\nadd rule inet ${t} c ip daddr @nosuch accept\n`),
      /nft failed: Error: No such file or directory/,
    )
    assert.ok(!tableExists(t), 'a batch is one transaction')
    await nft.run(`add table inet ${t}\nadd chain inet ${t} c\n`)
    assert.match(listTable(t), /chain c/)
    await nft.close()
  })

  it('a batch the writer dies on goes through a one-shot nft, and a new writer serves the next', async () => {
    const t = table('dies')
    const logs: string[] = []
    const nft = new NftWriter({ nftPath: fakeNft('dies', 'read line; exit 3'), log: (m) => logs.push(m) })
    await nft.run(`add table inet ${t}\n`)
    await nft.run(`add chain inet ${t} c\n`)
    assert.match(listTable(t), /chain c/)
    assert.equal(logs.length, 2)
    assert.match(logs[0] ?? '', /exited \(3\)/)
    await nft.close()
  })

  it('a writer that hangs is given up on after the timeout', async () => {
    const t = table('hangs')
    const logs: string[] = []
    const nft = new NftWriter({ nftPath: fakeNft('hangs', 'exec sleep 60'), timeoutMs: 300, log: (m) => logs.push(m) })
    const t0 = Date.now()
    await nft.run(`add table inet ${t}\n`)
    assert.ok(Date.now() - t0 < 5000)
    assert.ok(tableExists(t))
    assert.match(logs[0] ?? '', /no answer in 300 ms/)
    await nft.close()
  })

  it('an idle writer does not keep the process alive', () => {
    const t = table('idle')
    const script = join(dir, 'idle.mts')
    const writer = new URL('../src/network/nft.ts', import.meta.url).pathname
    writeFileSync(
      script,
      `import { NftWriter } from '${writer}'\nawait new NftWriter().run('add table inet ${t}\\n')\n`,
    )
    execFileSync(process.execPath, ['--import', 'tsx', script], { timeout: 20_000 })
    assert.ok(tableExists(t))
  })

  it('makes a batch one line, and refuses one a comment would cut short', () => {
    assert.equal(oneLine('table inet t {\n  chain c {\n  }\n}\n'), 'table inet t { ;   chain c { ;   } ; }')
    assert.throws(() => oneLine('add table inet t # x\n'), /'#'/)
  })
})
