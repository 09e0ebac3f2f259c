// Other hosts for the tests that check what a sandbox (or a build) may reach, all on this machine:
// a DNS server on loopback that knows the test's names, and a network namespace the test makes
// (its veth's host end 203.0.113.1/24) holding the addresses the test names, with a server in it.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { createSocket } from 'node:dgram'
import dnsPacket from 'dns-packet'

/** A DNS server on 127.0.0.1 answering A queries for `names` (other names: NXDOMAIN). */
export async function startTestDns(names: Record<string, string[]>): Promise<{ port: number; close(): void }> {
  const dns = createSocket('udp4')
  dns.on('message', (msg, rinfo) => {
    const q = dnsPacket.decode(msg)
    const question = q.questions?.[0]
    const ips = question?.type === 'A' ? (names[question.name.toLowerCase()] ?? []) : []
    const known = question ? question.name.toLowerCase() in names : false
    const answer = dnsPacket.encode({
      id: q.id,
      type: 'response',
      flags: known ? 0x8180 : 0x8183,
      questions: q.questions,
      answers: ips.map((data) => ({ type: 'A', name: question?.name ?? '', ttl: 60, data })),
    })
    dns.send(answer, rinfo.port, rinfo.address)
  })
  await new Promise<void>((r) => dns.bind(0, '127.0.0.1', () => r()))
  return { port: dns.address().port, close: () => dns.close() }
}

export interface TestNamespaceOptions {
  /** The namespace's name and its veth's host end. */
  ns: string
  hostIf: string
  /** Addresses inside, with their prefix (`203.0.113.10/24`, `10.77.1.10/32`). */
  addresses: string[]
  /** Addresses outside 203.0.113.0/24 the host routes into the namespace. */
  routes: string[]
  /** A Python program run inside; it prints `ready` once it serves. */
  python: string
  /** Every other line it prints. */
  onLine?: (line: string) => void
}

function sh(cmd: string[], input?: string): string {
  return execFileSync(cmd[0] as string, cmd.slice(1), { input }).toString()
}

/** Makes the namespace and starts its server; `stop` ends the server (by pid) and removes both ends. */
export async function startTestNamespace(o: TestNamespaceOptions): Promise<{ stop(): Promise<void> }> {
  sh(['ip', 'netns', 'add', o.ns])
  sh(['ip', 'link', 'add', o.hostIf, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', o.ns])
  sh(
    ['ip', '-batch', '-'],
    [
      `addr add 203.0.113.1/24 dev ${o.hostIf}`,
      `link set ${o.hostIf} up`,
      ...o.routes.map((r) => `route add ${r}/32 dev ${o.hostIf}`),
      '',
    ].join('\n'),
  )
  sh(
    ['ip', '-n', o.ns, '-batch', '-'],
    [
      ...o.addresses.map((a) => `addr add ${a} dev eth0`),
      'link set eth0 up',
      'link set lo up',
      'route add default via 203.0.113.1',
      '',
    ].join('\n'),
  )
  const server: ChildProcess = spawn('ip', ['netns', 'exec', o.ns, 'python3', '-u', '-c', o.python], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const stop = async () => {
    if (server.pid && server.exitCode === null && server.signalCode === null) {
      server.kill('SIGKILL')
      await new Promise((r) => server.once('exit', r))
    }
    execFileSync('ip', ['netns', 'delete', o.ns], { stdio: 'ignore' })
    try {
      execFileSync('ip', ['link', 'delete', o.hostIf], { stdio: 'ignore' })
    } catch {
      // went with the namespace
    }
  }
  try {
    await new Promise<void>((resolve, reject) => {
      let buf = ''
      server.stdout?.on('data', (chunk: Buffer) => {
        buf += chunk.toString()
        const lines = buf.split('\n')
        buf = lines.pop() ?? ''
        for (const l of lines) {
          if (l === 'ready') resolve()
          else o.onLine?.(l)
        }
      })
      server.once('exit', (code) => reject(new Error(`the test server in ${o.ns} exited ${code}`)))
    })
  } catch (err) {
    await stop()
    throw err
  }
  return { stop }
}
