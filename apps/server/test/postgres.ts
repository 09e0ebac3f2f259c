// A real PostgreSQL 15 (Debian's postgresql-15) for tests: a cluster of its own in a temp dir, on
// a free loopback port, run as the `postgres` user (initdb refuses root); gone after `stop`.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'

const BIN = '/usr/lib/postgresql/15/bin'

export interface TestPostgres {
  /** A connection URL for `database` (created on first use by `database()`). */
  url(database?: string): string
  /** A new, empty database; returns its URL. */
  database(name: string): Promise<string>
  /** Shuts the server down (fast: clients are cut off), its data kept. */
  halt(): Promise<void>
  /** Starts it again on the same port after `halt`. */
  restart(): Promise<void>
  stop(): Promise<void>
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address()
      srv.close(() => resolve(typeof addr === 'object' && addr ? addr.port : 0))
    })
  })
}

export async function startPostgres(): Promise<TestPostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'fbx-pg-'))
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString())
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString())
  chownSync(dir, uid, gid)
  const data = join(dir, 'data')
  execFileSync('runuser', ['-u', 'postgres', '--', `${BIN}/initdb`, '-D', data, '-A', 'trust', '-U', 'forkbox'], {
    stdio: 'ignore',
  })
  const port = await freePort()
  const launch = () =>
    spawn(
      'runuser',
      [
        '-u',
        'postgres',
        '--',
        `${BIN}/postgres`,
        '-D',
        data,
        '-p',
        String(port),
        '-k',
        dir,
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'fsync=off',
      ],
      { stdio: 'ignore' },
    )
  let proc: ChildProcess | null = launch()
  const url = (database = 'postgres') => `postgres://forkbox@127.0.0.1:${port}/${database}`
  const halt = async () => {
    if (proc?.pid && proc.exitCode === null) {
      const exited = new Promise((r) => proc?.once('exit', r))
      // SIGINT to the postmaster itself (runuser does not pass it on): a fast shutdown, which
      // cuts connected clients off instead of waiting for them
      const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0])
      if (Number.isSafeInteger(pid) && pid > 1) process.kill(pid, 'SIGINT')
      else proc.kill('SIGTERM')
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))])
      if (proc.exitCode === null) proc.kill('SIGKILL')
    }
    proc = null
  }
  const ready = async () => {
    for (let i = 0; i < 100; i++) {
      const client = new pg.Client({ connectionString: url() })
      try {
        await client.connect()
        await client.end()
        return true
      } catch {
        await client.end().catch(() => {})
        await new Promise((r) => setTimeout(r, 100))
      }
    }
    return false
  }
  const stop = async () => {
    await halt()
    rmSync(dir, { recursive: true, force: true })
  }
  if (await ready())
    return {
      url,
      async database(name) {
        const admin = new pg.Client({ connectionString: url() })
        await admin.connect()
        try {
          await admin.query(`create database "${name.replace(/"/g, '')}"`)
        } finally {
          await admin.end()
        }
        return url(name)
      },
      stop,
      halt,
      async restart() {
        proc = launch()
        if (!(await ready())) throw new Error('the test postgres did not come back')
      },
    }
  await stop()
  throw new Error('the test postgres did not come up')
}
