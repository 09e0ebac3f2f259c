// The edge over TLS: forkbox serves HTTPS itself with an operator's wildcard certificate (here one
// a CA made by the test signed), on port 443 of a loopback address of its own. Clients in another
// process resolve `*.fbx.test` to that address by their own override (no /etc/hosts, no DNS
// server) and trust the test's CA: the official E2B clients with only E2B_DOMAIN set, and
// forkbox's SDK reaching an exposed port at `https://{getHost(port)}`.
import assert from 'node:assert/strict'
import { execFile, execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:https'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import { promisify } from 'node:util'
import { useTestHost } from './harness.ts'

const DOMAIN = 'fbx.test'
// a loopback address no other test host binds (all of 127/8 is this machine's)
const ADDR = `127.${100 + (process.pid % 100)}.${(process.pid >> 7) % 250}.1`
const certs = mkdtempSync(join(tmpdir(), 'fbx-edge-'))

/** A CA, and a certificate it signed for `fbx.test` and `*.fbx.test`. */
function makeCertificates(dir: string): { ca: string; cert: string; key: string } {
  const at = (f: string) => join(dir, f)
  const ssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' })
  ssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=forkbox test CA',
    '-keyout',
    at('ca.key'),
    '-out',
    at('ca.pem'),
  )
  ssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${DOMAIN}`, '-keyout', at('tls.key'), '-out', at('tls.csr'))
  writeFileSync(at('ext.cnf'), `subjectAltName=DNS:${DOMAIN},DNS:*.${DOMAIN}\n`)
  ssl(
    'x509',
    '-req',
    '-in',
    at('tls.csr'),
    '-CA',
    at('ca.pem'),
    '-CAkey',
    at('ca.key'),
    '-CAcreateserial',
    '-days',
    '1',
    '-extfile',
    at('ext.cnf'),
    '-out',
    at('tls.pem'),
  )
  return { ca: at('ca.pem'), cert: at('tls.pem'), key: at('tls.key') }
}

const files = makeCertificates(certs)
const host = useTestHost({
  options: () => ({ host: ADDR, port: 443, sandboxDomain: DOMAIN, tlsCertFile: files.cert, tlsKeyFile: files.key }),
})
after(() => rmSync(certs, { recursive: true, force: true }))

describe('the edge over TLS', () => {
  it('serves HTTPS with the operator certificate and HSTS, and nothing in plain HTTP', async () => {
    assert.equal(host().conn.url, `https://${ADDR}:443`)
    const { status, hsts } = await new Promise<{ status: number; hsts: unknown }>((resolve, reject) => {
      const req = request(
        { host: ADDR, port: 443, path: '/healthz', servername: `api.${DOMAIN}`, ca: [readFileSync(files.ca)] },
        (res) => {
          res.resume()
          resolve({ status: res.statusCode ?? 0, hsts: res.headers['strict-transport-security'] })
        },
      )
      req.on('error', reject)
      req.end()
    })
    assert.equal(status, 200)
    // browsers are told to come back over HTTPS only
    assert.equal(hsts, 'max-age=31536000')
    const plain = await fetch(`http://${ADDR}:443/healthz`).then(
      (r) => r.status,
      () => 'refused',
    )
    assert.notEqual(plain, 200)
  })

  it('the official E2B clients work with only E2B_DOMAIN; an exposed port is a real https origin', async () => {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', '--import', './tests/e2e/fixtures/resolve.ts', 'tests/e2e/fixtures/edge-client.ts'],
      {
        env: {
          PATH: process.env.PATH,
          NODE_EXTRA_CA_CERTS: files.ca,
          FBX_TEST_DOMAIN: DOMAIN,
          FBX_TEST_ADDR: ADDR,
          FBX_ADMIN_KEY: host().conn.apiKey,
          E2B_DOMAIN: DOMAIN,
        },
        timeout: 240_000,
      },
    ).catch((err: { stdout?: string; stderr?: string }) => {
      assert.fail(`the client failed: ${err.stderr ?? ''}${err.stdout ?? ''}`)
    })
    const seen = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}')
    assert.match(seen.e2bRun, /^hi from /, stderr)
    assert.equal(seen.e2bRead, 'over TLS')
    assert.match(seen.e2bHost, new RegExp(`^8000-sbx-[0-9a-f]+\\.${DOMAIN.replace('.', '\\.')}$`))
    assert.equal(seen.code, '42')
    assert.match(seen.ownHost, new RegExp(`^8000-sbx-[0-9a-f]+\\.${DOMAIN.replace('.', '\\.')}$`))
    assert.equal(seen.port, 'served')
  })
})
