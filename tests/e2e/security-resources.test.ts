// What one tenant can make the server hold (issue 13, findings 9 and 10), on real runsc: a DNS flood
// from a sandbox leaves the server's open files flat, and a 150 MB multipart upload through envd's
// POST /files leaves its memory flat. The server runs in this test process, so /proc/self is its.
// The resolver's upstream is a DNS server of this test on loopback; no outside address is used.
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { createSocket } from 'node:dgram'
import { readdirSync } from 'node:fs'
import { request } from 'node:http'
import { after, describe, it } from 'node:test'
import { Sandbox } from '@forkbox/sdk'
import dnsPacket from 'dns-packet'
import { useTestHost } from './harness.ts'

const FLOOD_QUERIES = 1000
/** Upstream answers to the flood come this late, as a slow or unreachable server's would. */
const SLOW_ANSWER_MS = 1000
const ADDRESS = '203.0.113.10'

// the resolver's upstream: `*.flood.test` answered late, anything else at once
let asked = 0
const dns = createSocket('udp4')
dns.on('message', (msg, rinfo) => {
  asked++
  let q: dnsPacket.Packet
  try {
    q = dnsPacket.decode(msg)
  } catch {
    return
  }
  const name = q.questions?.[0]?.name ?? ''
  const answer = dnsPacket.encode({
    id: q.id,
    type: 'response',
    flags: 0x8180,
    questions: q.questions,
    answers: q.questions?.[0]?.type === 'A' ? [{ type: 'A', name, ttl: 60, data: ADDRESS }] : [],
  })
  const send = () => dns.send(answer, rinfo.port, rinfo.address)
  if (name.endsWith('.flood.test')) setTimeout(send, SLOW_ANSWER_MS)
  else send()
})
await new Promise<void>((r) => dns.bind(0, '127.0.0.1', () => r()))
const dnsPort = dns.address().port

/** In the sandbox: fires `n` A queries at its nameserver without waiting, then counts the answers by rcode. */
const FLOOD = `
import socket, struct, sys, time, json
n = int(sys.argv[1])
ns = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
def query(i):
    name = b"".join(bytes([len(p)]) + p for p in (b"q%d" % i, b"flood", b"test")) + b"\\0"
    return struct.pack(">HHHHHH", i, 0x0100, 1, 0, 0, 0) + name + struct.pack(">HH", 1, 1)
start = time.time()
for i in range(n):
    s.sendto(query(i), (ns, 53))
sent = time.time() - start
s.settimeout(0.5)
rcodes = {}
deadline = time.time() + 4
while time.time() < deadline:
    try:
        data, _ = s.recvfrom(4096)
    except socket.timeout:
        continue
    rc = str(data[3] & 15)
    rcodes[rc] = rcodes.get(rc, 0) + 1
print(json.dumps({"sentSeconds": round(sent, 3), "rcodes": rcodes}))
`

const openFiles = () => readdirSync('/proc/self/fd').length
const MiB = 1024 * 1024

/** Samples `measure` every `everyMs` while `work` runs; returns its result and the largest sample. */
async function peakDuring<T>(
  measure: () => number,
  work: () => Promise<T>,
  everyMs = 10,
): Promise<{ result: T; peak: number }> {
  let peak = measure()
  const timer = setInterval(() => {
    peak = Math.max(peak, measure())
  }, everyMs)
  try {
    const result = await work()
    return { result, peak: Math.max(peak, measure()) }
  } finally {
    clearInterval(timer)
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('one tenant cannot exhaust the server', () => {
  const host = useTestHost({ options: () => ({ dnsUpstreams: [`127.0.0.1:${dnsPort}`] }) })
  after(() => dns.close())

  it(`${FLOOD_QUERIES} DNS queries from one sandbox leave the server's open files flat`, async () => {
    await using sbx = await Sandbox.create({ ...host().conn, network: { internet: true } })
    await sbx.files.write('/tmp/flood.py', FLOOD)
    // DNS works for this sandbox (so the flood below goes where queries go)
    const lookup = async () =>
      (await sbx.exec(['python3', '-c', 'import socket; print(socket.gethostbyname("ok.test"))'])).stdout.trim()
    assert.equal(await lookup(), ADDRESS)
    const before = openFiles()
    const askedBefore = asked
    const { result, peak } = await peakDuring(openFiles, () =>
      sbx.exec(['python3', '/tmp/flood.py', String(FLOOD_QUERIES)], { timeoutSeconds: 60 }),
    )
    assert.equal(result.exitCode, 0, result.stderr)
    const out = JSON.parse(result.stdout) as { sentSeconds: number; rcodes: Record<string, number> }
    console.log(
      `dns flood: ${FLOOD_QUERIES} queries sent in ${out.sentSeconds}s, answers by rcode ${JSON.stringify(out.rcodes)}, ` +
        `${asked - askedBefore} reached the upstream, open files ${before} -> peak ${peak} (+${peak - before})`,
    )
    assert.ok(peak - before <= 20, `open files grew from ${before} to ${peak}`)
    // the caps answered the excess at once (SERVFAIL) instead of queueing it upstream
    assert.ok((out.rcodes['2'] ?? 0) > 0, JSON.stringify(out.rcodes))
    assert.ok(asked - askedBefore < FLOOD_QUERIES / 2, `${asked - askedBefore} queries reached the upstream`)
    // and the sandbox resolves again once its budget refills
    await sleep(2500)
    assert.equal(await lookup(), ADDRESS)
  })

  it('a 150 MB multipart upload through envd leaves server memory within +50 MB and arrives intact', async () => {
    const t = host()
    const keyRes = await fetch(`${t.conn.url}/v1/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.conn.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'uploader', format: 'e2b' }),
    })
    const { key } = (await keyRes.json()) as { key: string }
    const created = await fetch(`${t.conn.url}/sandboxes`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ templateID: 'base', timeout: 300 }),
    })
    assert.equal(created.status, 201)
    const { sandboxID, envdAccessToken } = (await created.json()) as { sandboxID: string; envdAccessToken: string }
    const sbx = await Sandbox.connect(sandboxID, { url: t.conn.url, apiKey: key })
    try {
      /** POSTs a multipart body of `sizeBytes` generated as it is sent; resolves to [status, body, sha256]. */
      const upload = (path: string, sizeBytes: number) =>
        new Promise<{ status: number; body: string; sha256: string }>((resolve, reject) => {
          const boundary = `fbx-${randomBytes(8).toString('hex')}`
          const url = new URL(`${t.conn.url}/files?path=${encodeURIComponent(path)}`)
          const req = request(url, {
            method: 'POST',
            headers: {
              'e2b-sandbox-id': sandboxID,
              'e2b-sandbox-port': '49983',
              'x-access-token': envdAccessToken,
              'content-type': `multipart/form-data; boundary=${boundary}`,
            },
          })
          const hash = createHash('sha256')
          req.on('error', reject)
          req.on('response', (res) => {
            let body = ''
            res.on('data', (d) => {
              body += d
            })
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body, sha256: hash.digest('hex') }))
          })
          const base = randomBytes(MiB)
          ;(async () => {
            req.write(
              `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n` +
                'Content-Type: application/octet-stream\r\n\r\n',
            )
            for (let sent = 0, i = 0; sent < sizeBytes; i++) {
              // each MiB differs (its index up front), so a lost or repeated chunk changes the hash
              const chunk = Buffer.from(base.subarray(0, Math.min(MiB, sizeBytes - sent)))
              chunk.writeUInt32BE(i, 0)
              hash.update(chunk)
              sent += chunk.length
              if (!req.write(chunk)) await new Promise((r) => req.once('drain', r))
            }
            req.end(`\r\n--${boundary}--\r\n`)
          })().catch(reject)
        })

      // warm up the path (parser, streams, guest) so the baseline is the server's steady state
      const warm = await upload('/home/user/warm.bin', 4 * MiB)
      assert.equal(warm.status, 200, warm.body)
      await sleep(500)
      const rss = () => process.memoryUsage.rss()
      const samples: number[] = []
      for (let i = 0; i < 20; i++) {
        samples.push(rss())
        await sleep(25)
      }
      const baseline = samples.sort((a, b) => a - b)[samples.length >> 1] as number
      const size = 150 * 1000 * 1000
      const started = Date.now()
      const { result, peak } = await peakDuring(rss, () => upload('/home/user/big.bin', size), 20)
      const seconds = (Date.now() - started) / 1000
      console.log(
        `multipart upload: ${size} bytes in ${seconds.toFixed(1)}s, server rss baseline ${(baseline / MiB).toFixed(0)} MiB, ` +
          `peak ${(peak / MiB).toFixed(0)} MiB (+${((peak - baseline) / MiB).toFixed(1)} MiB)`,
      )
      assert.equal(result.status, 200, result.body)
      assert.deepEqual(JSON.parse(result.body), [{ name: 'big.bin', type: 'file', path: '/home/user/big.bin' }])
      assert.ok(peak - baseline <= 50 * MiB, `rss grew by ${((peak - baseline) / MiB).toFixed(1)} MiB`)
      const check = await sbx.exec(['sh', '-c', 'stat -c %s /home/user/big.bin; sha256sum /home/user/big.bin'])
      const [bytes, sum] = check.stdout.trim().split(/\s+/)
      assert.equal(Number(bytes), size)
      assert.equal(sum, result.sha256)

      // a broken body is the client's error, in E2B's shape, and the platform goes on
      const broken = await fetch(`${t.conn.url}/files?path=/home/user/broken.bin`, {
        method: 'POST',
        headers: {
          'e2b-sandbox-id': sandboxID,
          'x-access-token': envdAccessToken,
          'content-type': 'multipart/form-data; boundary=xyz',
        },
        body: '--xyz\r\nContent-Disposition: form-data; name="file"; filename="b"\r\n\r\nno end',
      })
      assert.equal(broken.status, 400)
      assert.equal(((await broken.json()) as { errorCode: string }).errorCode, 'VALIDATION_FAILED')
      const gone = await sbx.exec(['sh', '-c', 'test -e /home/user/broken.bin && echo there || echo absent'])
      assert.equal(gone.stdout.trim(), 'absent')
    } finally {
      await sbx.kill()
    }
  })
})
