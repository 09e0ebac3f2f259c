// The resolver every sandbox's port 53 is redirected to. It answers for the sandbox the query came
// from: a name its policy denies gets NXDOMAIN, an answer is stripped of addresses no sandbox may
// reach (so a name cannot be rebound onto the host, its network or the metadata service), and the
// addresses of an allowed name are opened for that sandbox before the answer leaves. What it costs
// the host is bounded whatever a sandbox sends: queries go upstream through a few shared sockets,
// and each sandbox has an in-flight and a rate cap past which it gets an immediate SERVFAIL.
import { randomInt } from 'node:crypto'
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

export interface ResolverLimits {
  /** Queries of one sandbox being answered at once (waiting on an upstream or on its rules). */
  inFlightPerSandbox: number
  /** Queries of all sandboxes being answered at once. */
  inFlightTotal: number
  /** Queries a sandbox may send per second, sustained... */
  queriesPerSecond: number
  /** ...and at once, after a quiet spell. */
  burst: number
  /** Refusals (SERVFAIL, REFUSED) a sandbox gets per second; past that its queries are dropped unanswered. */
  refusalsPerSecond: number
  /** How long one upstream server gets to answer. */
  upstreamTimeoutMs: number
  /** Sockets all upstream queries share (each query takes one at random). */
  upstreamSockets: number
  /** How often one upstream socket is replaced by a fresh one (a new source port); 0: never. */
  socketRotationMs: number
}

export const DEFAULT_RESOLVER_LIMITS: ResolverLimits = {
  inFlightPerSandbox: 32,
  inFlightTotal: 1024,
  queriesPerSecond: 100,
  burst: 200,
  refusalsPerSecond: 1000,
  upstreamTimeoutMs: 2000,
  upstreamSockets: 4,
  socketRotationMs: 60_000,
}

export interface ResolverOptions {
  /** `host:port` servers to forward to; default: the host's /etc/resolv.conf. */
  upstreams?: string[]
  /** The policy of the sandbox at a source address, or null (not one of ours). */
  policyOf(address: string): ResolverPolicy | null
  log(message: string): void
  limits?: Partial<ResolverLimits>
}

/** Larger than any query a stub resolver sends; bigger packets are not decoded at all. */
const MAX_QUERY_BYTES = 1232
const HEADER_BYTES = 12
/** A sandbox's budget is forgotten after this long without queries. */
const IDLE_BUDGET_MS = 30_000
const LOG_EVERY_MS = 10_000

const RCODES = { NOERROR: 0, SERVFAIL: 2, NXDOMAIN: 3, REFUSED: 5 } as const
type Rcode = keyof typeof RCODES

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

function split(hostPort: string): Upstream {
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

function closeQuietly(socket: Socket): void {
  try {
    socket.close()
  } catch {
    // already closed
  }
}

interface Upstream {
  host: string
  port: number
}

/** A token bucket: `take()` is false once `rate` per second (plus `burst` saved up) are spent. */
class Bucket {
  private tokens: number
  private at = Date.now()
  constructor(
    private readonly rate: number,
    private readonly burst: number,
  ) {
    this.tokens = burst
  }
  take(now: number): boolean {
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) / 1000) * this.rate)
    this.at = now
    if (this.tokens < 1) return false
    this.tokens -= 1
    return true
  }
}

/** What one sandbox (by source address) is spending. */
interface Budget {
  inFlight: number
  queries: Bucket
  refusals: Bucket
  lastSeen: number
}

/** A query waiting on an upstream. */
interface Pending {
  up: Upstream
  question: dnsPacket.Question
  settle(err: Error | null, answer?: dnsPacket.Packet): void
}

/** A shared upstream socket and the queries waiting on it, by DNS id. */
interface UpstreamSocket {
  socket: Socket
  pending: Map<number, Pending>
  /** Replaced by a fresh socket: closes once its last query settles. */
  retired: boolean
}

export class Resolver {
  private socket: Socket | null = null
  private readonly upstreams: Upstream[]
  private readonly limits: ResolverLimits
  private readonly budgets = new Map<string, Budget>()
  private outgoing: UpstreamSocket[] = []
  private readonly retired = new Set<UpstreamSocket>()
  private inFlight = 0
  private timers: NodeJS.Timeout[] = []
  private closed = false
  private lastLog = 0
  private suppressed = 0

  constructor(private readonly opts: ResolverOptions) {
    this.upstreams = (opts.upstreams?.length ? opts.upstreams : hostUpstreams()).map(split)
    this.limits = { ...DEFAULT_RESOLVER_LIMITS, ...opts.limits }
  }

  /** Listens on an ephemeral UDP port of every address (the rules let only sandboxes reach it). */
  async listen(): Promise<number> {
    const socket = createSocket('udp4')
    this.socket = socket
    socket.on('message', (msg, rinfo) => this.onQuery(msg, rinfo))
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject)
      socket.bind(0, '0.0.0.0', () => {
        socket.off('error', reject)
        resolve()
      })
    })
    socket.on('error', (err) => this.warn(`resolver socket: ${String(err)}`))
    for (let i = 0; i < Math.max(1, this.limits.upstreamSockets); i++) this.outgoing.push(await this.openUpstream())
    const sweep = setInterval(() => this.sweep(), IDLE_BUDGET_MS)
    sweep.unref()
    this.timers.push(sweep)
    if (this.limits.socketRotationMs > 0) {
      const rotate = setInterval(() => this.rotate(), this.limits.socketRotationMs)
      rotate.unref()
      this.timers.push(rotate)
    }
    return socket.address().port
  }

  /** Queries of all sandboxes being answered now. */
  get inFlightTotal(): number {
    return this.inFlight
  }

  /** Logs, at most once per interval (a sandbox can make every packet an error). */
  private warn(message: string): void {
    const now = Date.now()
    if (now - this.lastLog < LOG_EVERY_MS) {
      this.suppressed++
      return
    }
    const more = this.suppressed ? ` (and ${this.suppressed} more since the last)` : ''
    this.lastLog = now
    this.suppressed = 0
    this.opts.log(`resolver: ${message}${more}`)
  }

  private budgetOf(address: string, now: number): Budget {
    let b = this.budgets.get(address)
    if (!b) {
      const l = this.limits
      b = {
        inFlight: 0,
        queries: new Bucket(l.queriesPerSecond, l.burst),
        refusals: new Bucket(l.refusalsPerSecond, l.refusalsPerSecond),
        lastSeen: now,
      }
      this.budgets.set(address, b)
    }
    b.lastSeen = now
    return b
  }

  private sweep(): void {
    const before = Date.now() - IDLE_BUDGET_MS
    for (const [address, b] of this.budgets) if (b.inFlight === 0 && b.lastSeen < before) this.budgets.delete(address)
  }

  /** Never throws: whatever arrives, the worst outcome is one dropped packet. */
  private onQuery(msg: Buffer, rinfo: RemoteInfo): void {
    try {
      if (msg.length < HEADER_BYTES || msg.length > MAX_QUERY_BYTES) return
      const policy = this.opts.policyOf(rinfo.address)
      // not a sandbox of ours: no answer at all (nothing to reflect off us)
      if (!policy) return
      const now = Date.now()
      const budget = this.budgetOf(rinfo.address, now)
      let query: dnsPacket.Packet
      try {
        query = dnsPacket.decode(msg)
      } catch {
        return
      }
      if (query.type !== 'query' || !query.questions?.[0]) return
      const refuse = (rcode: Rcode) => {
        if (budget.refusals.take(now)) this.reply(query, rinfo, rcode)
      }
      if (!policy.internet) {
        refuse('REFUSED')
        return
      }
      const l = this.limits
      if (
        budget.inFlight >= l.inFlightPerSandbox ||
        this.inFlight >= l.inFlightTotal ||
        !budget.queries.take(now) ||
        this.closed
      ) {
        refuse('SERVFAIL')
        return
      }
      budget.inFlight++
      this.inFlight++
      this.answer(query, rinfo, policy)
        .catch((err) => {
          this.warn(String(err))
          this.reply(query, rinfo, 'SERVFAIL')
        })
        .finally(() => {
          budget.inFlight--
          this.inFlight--
        })
    } catch (err) {
      this.warn(`dropped a query: ${String(err)}`)
    }
  }

  private reply(query: dnsPacket.Packet, rinfo: RemoteInfo, rcode: Rcode, answers: dnsPacket.Answer[] = []): void {
    let out: Buffer
    try {
      out = dnsPacket.encode({
        id: query.id,
        type: 'response',
        flags: 0x8180 | RCODES[rcode],
        questions: query.questions,
        answers,
      })
    } catch (err) {
      // a record the encoder cannot write: say so rather than leave the sandbox waiting
      if (answers.length > 0) this.reply(query, rinfo, 'SERVFAIL')
      else this.warn(`cannot encode an answer: ${String(err)}`)
      return
    }
    try {
      this.socket?.send(out, rinfo.port, rinfo.address, (err) => {
        if (err) this.warn(`cannot answer ${rinfo.address}: ${String(err)}`)
      })
    } catch (err) {
      this.warn(`cannot answer ${rinfo.address}: ${String(err)}`)
    }
  }

  private async answer(query: dnsPacket.Packet, rinfo: RemoteInfo, policy: ResolverPolicy): Promise<void> {
    const q = query.questions?.[0] as dnsPacket.Question
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
    const code = (upstream.flags ?? 0) & 15
    const rcode: Rcode = code === RCODES.NXDOMAIN ? 'NXDOMAIN' : code === RCODES.NOERROR ? 'NOERROR' : 'SERVFAIL'
    this.reply(query, rinfo, rcode, rcode === 'NOERROR' ? answers : [])
  }

  /** Asks the upstream servers in turn. */
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

  private openUpstream(): Promise<UpstreamSocket> {
    const socket = createSocket('udp4')
    const entry: UpstreamSocket = { socket, pending: new Map(), retired: false }
    socket.on('message', (msg, rinfo) => this.onAnswer(entry, msg, rinfo))
    socket.on('error', (err) => this.warn(`upstream socket: ${String(err)}`))
    return new Promise((resolve) => socket.bind(0, '0.0.0.0', () => resolve(entry)))
  }

  /** Replaces one upstream socket, so the source port an off-path forger must guess moves on. */
  private async rotate(): Promise<void> {
    if (this.closed || this.outgoing.length === 0) return
    const i = randomInt(this.outgoing.length)
    const fresh = await this.openUpstream()
    const old = this.outgoing[i] as UpstreamSocket
    if (this.closed) {
      closeQuietly(fresh.socket)
      return
    }
    this.outgoing[i] = fresh
    old.retired = true
    this.retired.add(old)
    this.closeIfDone(old)
  }

  private closeIfDone(entry: UpstreamSocket): void {
    if (!entry.retired || entry.pending.size > 0) return
    this.retired.delete(entry)
    closeQuietly(entry.socket)
  }

  /** An upstream's answer: taken only from the server asked, on the socket asked from, for the id and question asked. */
  private onAnswer(entry: UpstreamSocket, msg: Buffer, rinfo: RemoteInfo): void {
    try {
      if (msg.length < HEADER_BYTES) return
      const pending = entry.pending.get(msg.readUInt16BE(0))
      if (!pending || rinfo.address !== pending.up.host || rinfo.port !== pending.up.port) return
      let p: dnsPacket.Packet
      try {
        p = dnsPacket.decode(msg)
      } catch {
        return
      }
      const q = p.questions?.[0]
      const asked = pending.question
      if (
        p.type !== 'response' ||
        p.questions?.length !== 1 ||
        !q ||
        q.name.toLowerCase() !== asked.name.toLowerCase() ||
        q.type !== asked.type ||
        q.class !== asked.class
      )
        return
      pending.settle(null, p)
    } catch (err) {
      this.warn(`dropped an upstream answer: ${String(err)}`)
    }
  }

  private ask(up: Upstream, question: dnsPacket.Question): Promise<dnsPacket.Packet> {
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new Error('resolver closed'))
      const entry = this.outgoing[randomInt(this.outgoing.length)] as UpstreamSocket
      // a random id no query on this socket holds (at most inFlightTotal of 65536 are taken)
      let id = randomInt(65536)
      for (let tries = 0; entry.pending.has(id); tries++) {
        if (tries > 32) return reject(new Error('no free query id'))
        id = randomInt(65536)
      }
      const timer = setTimeout(
        () => settle(new Error(`no answer from ${up.host}:${up.port}`)),
        this.limits.upstreamTimeoutMs,
      )
      const settle = (err: Error | null, answer?: dnsPacket.Packet) => {
        if (entry.pending.get(id) !== pending) return
        entry.pending.delete(id)
        clearTimeout(timer)
        this.closeIfDone(entry)
        if (err || !answer) reject(err ?? new Error('no answer'))
        else resolve(answer)
      }
      const pending: Pending = { up, question, settle }
      entry.pending.set(id, pending)
      let packet: Buffer
      try {
        packet = dnsPacket.encode({ id, type: 'query', flags: dnsPacket.RECURSION_DESIRED, questions: [question] })
      } catch (err) {
        return settle(err instanceof Error ? err : new Error(String(err)))
      }
      try {
        entry.socket.send(packet, up.port, up.host, (err) => {
          if (err) settle(err)
        })
      } catch (err) {
        settle(err instanceof Error ? err : new Error(String(err)))
      }
    })
  }

  close(): void {
    this.closed = true
    for (const t of this.timers) clearInterval(t)
    this.timers = []
    for (const entry of [...this.outgoing, ...this.retired]) {
      for (const p of [...entry.pending.values()]) p.settle(new Error('resolver closed'))
      closeQuietly(entry.socket)
    }
    this.outgoing = []
    this.retired.clear()
    if (this.socket) closeQuietly(this.socket)
    this.socket = null
  }
}
