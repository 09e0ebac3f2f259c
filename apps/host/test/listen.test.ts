// The host's HTTPS: served with the operator's certificate files, a renewal picked up while it
// runs, a broken renewal leaving the old certificate serving.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:https'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
import type { TLSSocket } from 'node:tls'
import { loadServerHostConfig } from '../src/config.ts'
import { serve } from '../src/listen.ts'

const dir = mkdtempSync(join(tmpdir(), 'fbx-tls-'))
after(() => rmSync(dir, { recursive: true, force: true }))

/** A self-signed certificate for `localhost`, as `{name}.pem` / `{name}.key`. */
function selfSigned(name: string): { cert: string; key: string } {
  const cert = join(dir, `${name}.pem`)
  const key = join(dir, `${name}.key`)
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1'].concat([
      '-subj',
      `/CN=${name}`,
      '-addext',
      'subjectAltName=DNS:localhost',
      '-keyout',
      key,
      '-out',
      cert,
    ]),
    { stdio: 'pipe' },
  )
  return { cert, key }
}

/** The common name of the certificate the server at `port` shows now. */
function servedName(port: number, cas: Buffer[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path: '/', servername: 'localhost', ca: cas, agent: false },
      (res) => {
        const cn = (res.socket as TLSSocket).getPeerCertificate().subject.CN
        res.resume()
        resolve(String(cn))
      },
    )
    req.on('error', reject)
    req.end()
  })
}

describe('the host server over TLS', () => {
  it('serves the certificate files, takes a renewal without a restart, keeps the old one on a broken renewal', async () => {
    const a = selfSigned('first')
    const b = selfSigned('second')
    const live = { certFile: join(dir, 'live.pem'), keyFile: join(dir, 'live.key') }
    copyFileSync(a.cert, live.certFile)
    copyFileSync(a.key, live.keyFile)
    const errors: unknown[] = []
    const served = await serve(
      (_req, res) => res.end('ok'),
      (_req, socket) => socket.destroy(),
      { port: 0, host: '127.0.0.1', tls: live, certPollMs: 50, onCertError: (err) => errors.push(err) },
    )
    try {
      assert.match(served.url, /^https:\/\/127\.0\.0\.1:\d+$/)
      const cas = [readFileSync(a.cert), readFileSync(b.cert)]
      assert.equal(await servedName(served.port, cas), 'first')
      copyFileSync(b.cert, live.certFile)
      copyFileSync(b.key, live.keyFile)
      let name = ''
      for (let i = 0; i < 100 && name !== 'second'; i++) {
        name = await servedName(served.port, cas)
        if (name !== 'second') await new Promise((r) => setTimeout(r, 50))
      }
      assert.equal(name, 'second')
      writeFileSync(live.certFile, 'not a certificate')
      for (let i = 0; i < 100 && errors.length === 0; i++) await new Promise((r) => setTimeout(r, 50))
      assert.ok(errors.length > 0)
      assert.equal(await servedName(served.port, cas), 'second')
    } finally {
      await served.close()
    }
  })

  it('takes both files or neither', () => {
    assert.throws(() => loadServerHostConfig({ tlsCertFile: '/x.pem' }, {}), /tlsKeyFile/)
    const both = loadServerHostConfig({}, { FORKBOX_TLS_CERT: '/c.pem', FORKBOX_TLS_KEY: '/k.pem' })
    assert.deepEqual([both.tlsCertFile, both.tlsKeyFile], ['/c.pem', '/k.pem'])
  })
})
