// The server secret: 32 random bytes made on first start, kept 0600 beside (not in) the
// database, so a copy of the database alone cannot forge a token.
import { randomBytes } from 'node:crypto'
import { chmodSync, readFileSync, writeFileSync } from 'node:fs'

const BYTES = 32

export function loadServerSecret(path: string): Buffer {
  try {
    const secret = readFileSync(path)
    if (secret.length < BYTES) throw new Error(`the server secret ${path} is shorter than ${BYTES} bytes`)
    chmodSync(path, 0o600)
    return secret
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
  const secret = randomBytes(BYTES)
  // `wx`: two processes starting together keep the first one's secret
  try {
    writeFileSync(path, secret, { mode: 0o600, flag: 'wx' })
    return secret
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    return readFileSync(path)
  }
}
