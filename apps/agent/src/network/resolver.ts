// The resolver every sandbox's port 53 is redirected to. It answers for the sandbox the query came
// from: a name its policy denies gets NXDOMAIN, an answer is stripped of addresses no sandbox may
// reach (so a name cannot be rebound onto the host, its network or the metadata service), and the
// addresses of an allowed name are opened for that sandbox before the answer leaves.
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram'
import { readFileSync } from 'node:fs'
import { isIPv4 } from 'node:net'
import dnsPacket from 'dns-packet'

export interface ResolverPolicy {
  /** Whether it may resolve at all. */
  internet: boolean
  /** The name rule that matches: deny (refuse it) or allow (open its addresses); null: none. */
  ruleFor(name: string): { kind: 'allow' | 'deny'; rule: string } | null
  /** Whether an answer may carry this address (false for blocked ranges). */
  reachable(ip: string): boolean
  /** Opens (or, for denied names, closes) these addresses for the sandbox, as learned through
   * `rule`; resolves once in force. */
  learned(kind: 'allow' | 'deny', rule: string, ips: string[]): Promise<void>
}

export interface ResolverOptions {
  /** `host:port` servers to forward to; default: the host's /etc/resolv.conf. */
  upstreams?: string[]
  /** The policy of the sandbox at a source address, or null (not one of ours). */
  policyOf(address: string): ResolverPolicy | null
  log(message: string): void
}

const UPSTREAM_TIMEOUT_MS = 2000

function dataOf(a: dnsPacket.Answer): string {
  return 'data' in a ? String(a.data) : ''
}

function hostUpstreams(): string[] {
  try {
    return readFileSync('/etc/resolv.conf', 'utf8')
      .split('\n')
      .map((l) => /^\s*nameserver\s+(\S+)/.exec(l)?.[1])
      .filter((ip): ip is string => Boolean(ip && isIPv4(ip) && !ip.startsWith('127.')))
      .map((ip) => `${ip}:53`)
  } catch {
    return []
  }
}

function split(hostPort: string): { host: string; port: number } {
  const i = hostPort.lastIndexOf(':')
  return i < 0 ? { host: hostPort, port: 53 } : { host: hostPort.slice(0, i), port: Number(hostPort.slice(i + 1)) }
}

/** `name` matches `rule`: the same name, or for `*.example.com` any name under example.com. */
export function nameMatches(name: string, rule: string): boolean {
  const n = name.toLowerCase().replace(/\.$/, '')
  const r = rule.toLowerCase().replace(/\.$/, '')
  if (r.startsWith('*.')) return n.endsWith(r.slice(1))
  return n === r
}

export class Resolver {
  private socket: Socket | null = null
  private readonly upstreams: { host: string; port: number }[]

  constructor(private readonly opts: ResolverOptions) {
    this.upstreams = (opts.upstreams?.length ? opts.upstreams : hostUpstreams()).map(split)
  }

  /** Listens on an ephemeral UDP port of every address (the rules let only sandboxes reach it). */
  async listen(): Promise<number> {
    const socket = createSocket('udp4')
    this.socket = socket
    socket.on('message', (msg, rinfo) => {
      this.answer(msg, rinfo).catch((err) => this.opts.log(`resolver: ${String(err)}`))
    })
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject)
      socket.bind(0, '0.0.0.0', () => resolve())
    })
    return socket.address().port
  }

  private reply(query: dnsPacket.Packet, rinfo: RemoteInfo, rcode: string, answers: dnsPacket.Answer[] = []): void {
    const flags = (rcode === 'NXDOMAIN' ? 3 : rcode === 'REFUSED' ? 5 : rcode === 'SERVFAIL' ? 2 : 0) | 0x8180
    const out = dnsPacket.encode({
      id: query.id,
      type: 'response',
      flags,
      questions: query.questions,
      answers,
    })
    this.socket?.send(out, rinfo.port, rinfo.address)
  }

  private async answer(msg: Buffer, rinfo: RemoteInfo): Promise<void> {
    let query: dnsPacket.Packet
    try {
      query = dnsPacket.decode(msg)
    } catch {
      return
    }
    const policy = this.opts.policyOf(rinfo.address)
    const q = query.questions?.[0]
    if (!q) return
    if (!policy?.internet) return this.reply(query, rinfo, 'REFUSED')
    const rule = policy.ruleFor(q.name)
    let upstream: dnsPacket.Packet
    try {
      upstream = await this.forward(q)
    } catch {
      return this.reply(query, rinfo, 'SERVFAIL')
    }
    // a name's addresses as they come, minus what no sandbox may reach (rebinding onto us)
    const answers = (upstream.answers ?? []).filter((a) => {
      if (a.type === 'A') return policy.reachable(dataOf(a))
      // sandboxes have IPv4 only; an AAAA would only lead to a refused connection
      return a.type !== 'AAAA'
    })
    const ips = answers.filter((a) => a.type === 'A').map(dataOf)
    if (rule?.kind === 'deny') {
      if (ips.length) await policy.learned('deny', rule.rule, ips)
      return this.reply(query, rinfo, 'NXDOMAIN')
    }
    if (rule?.kind === 'allow' && ips.length) await policy.learned('allow', rule.rule, ips)
    const rcode = ((upstream.flags ?? 0) & 15) === 3 ? 'NXDOMAIN' : 'NOERROR'
    this.reply(query, rinfo, rcode, answers)
  }

  /** Asks the upstream servers in turn, each from a fresh socket (a random source port per query). */
  private async forward(q: dnsPacket.Question): Promise<dnsPacket.Packet> {
    let last: unknown = new Error('no upstream DNS server')
    for (const up of this.upstreams) {
      try {
        return await this.ask(up, q)
      } catch (err) {
        last = err
      }
    }
    throw last
  }

  private ask(up: { host: string; port: number }, q: dnsPacket.Question): Promise<dnsPacket.Packet> {
    return new Promise((resolve, reject) => {
      const sock = createSocket('udp4')
      const id = Math.floor(Math.random() * 65536)
      const timer = setTimeout(() => {
        sock.close()
        reject(new Error(`no answer from ${up.host}:${up.port}`))
      }, UPSTREAM_TIMEOUT_MS)
      sock.on('message', (msg, rinfo) => {
        if (rinfo.address !== up.host) return
        let p: dnsPacket.Packet
        try {
          p = dnsPacket.decode(msg)
        } catch {
          return
        }
        if (p.id !== id || p.questions?.[0]?.name.toLowerCase() !== q.name.toLowerCase()) return
        clearTimeout(timer)
        sock.close()
        resolve(p)
      })
      sock.on('error', (err) => {
        clearTimeout(timer)
        sock.close()
        reject(err)
      })
      sock.send(
        dnsPacket.encode({ id, type: 'query', flags: dnsPacket.RECURSION_DESIRED, questions: [q] }),
        up.port,
        up.host,
      )
    })
  }

  close(): void {
    this.socket?.close()
    this.socket = null
  }
}
