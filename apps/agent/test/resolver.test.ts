// The sandbox resolver against a DNS server of this test on loopback: what it answers, and that no
// sandbox can make it hold more than its caps (sockets, queries in flight, queries per second).
import assert from 'node:assert/strict'
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram'
import { readdirSync } from 'node:fs'
import { afterEach, describe, it } from 'node:test'
import dnsPacket from 'dns-packet'
import { Resolver, type ResolverLimits, type ResolverPolicy } from '../src/network/resolver.ts'

const SANDBOX = '127.0.0.1'
const OTHER_SANDBOX = '127.0.0.2'

type Handler = (query: dnsPacket.Packet, rinfo: RemoteInfo, server: Socket) => void

/** A DNS server on loopback; `handle` decides what (if anything) it sends back. */
async function upstream(handle: Handler): Promise<{ address: string; seen: RemoteInfo[]; close(): void }> {
  const server = createSocket('udp4')
  const seen: RemoteInfo[] = []
  server.on('message', (msg, rinfo) => {
    seen.push(rinfo)
    handle(dnsPacket.decode(msg), rinfo, server)
  })
  await new Promise<void>((r) => server.bind(0, '127.0.0.1', () => r()))
  return { address: `127.0.0.1:${server.address().port}`, seen, close: () => server.close() }
}

function answer(query: dnsPacket.Packet, ips: string[], overrides: Partial<dnsPacket.Packet> = {}): Buffer {
  const name = query.questions?.[0]?.name ?? ''
  return dnsPacket.encode({
    id: query.id,
    type: 'response',
    flags: 0x8180,
    questions: query.questions,
    answers: ips.map((data) => ({ type: 'A', name, ttl: 60, data })),
    ...overrides,
  })
}

const answering =
  (ips: string[]): Handler =>
  (q, rinfo, server) =>
    server.send(answer(q, ips), rinfo.port, rinfo.address)
const silent: Handler = () => {}

function policy(over: Partial<ResolverPolicy> = {}): ResolverPolicy {
  return {
    internet: true,
    ruleFor: () => null,
    reachable: (ip) => !ip.startsWith('169.254.'),
    learned: async () => {},
    ...over,
  }
}

/** A sandbox's stub resolver: sends queries from `address` and collects the answers by id. */
async function client(address = SANDBOX) {
  const socket = createSocket('udp4')
  const answers = new Map<number, dnsPacket.Packet>()
  socket.on('message', (msg) => {
    const p = dnsPacket.decode(msg)
    answers.set(p.id ?? -1, p)
  })
  await new Promise<void>((r) => socket.bind(0, address, () => r()))
  return {
    answers,
    send(port: number, id: number, name = `n${id}.test`) {
      socket.send(
        dnsPacket.encode({ id, type: 'query', flags: dnsPacket.RECURSION_DESIRED, questions: [{ type: 'A', name }] }),
        port,
        '127.0.0.1',
      )
    },
    raw(port: number, bytes: Uint8Array) {
      socket.send(bytes, port, '127.0.0.1')
    },
    close: () => socket.close(),
  }
}

const rcode = (p: dnsPacket.Packet | undefined) => (p ? (p.flags ?? 0) & 15 : -1)
const SERVFAIL = 2
const REFUSED = 5

async function until(what: string, check: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('sandbox resolver', () => {
  const cleanup: (() => void)[] = []
  afterEach(() => {
    for (const c of cleanup.splice(0)) c()
  })

  async function start(
    handler: Handler,
    opts: {
      policyOf?: (address: string) => ResolverPolicy | null
      limits?: Partial<ResolverLimits>
      upstreams?: string[]
    } = {},
  ) {
    const up = await upstream(handler)
    const logs: string[] = []
    const resolver = new Resolver({
      upstreams: opts.upstreams ?? [up.address],
      policyOf: opts.policyOf ?? ((a) => (a === SANDBOX || a === OTHER_SANDBOX ? policy() : null)),
      log: (m) => logs.push(m),
      limits: opts.limits,
    })
    const port = await resolver.listen()
    const c = await client()
    cleanup.push(
      () => c.close(),
      () => resolver.close(),
      () => up.close(),
    )
    return { up, resolver, port, c, logs }
  }

  it('forwards, strips addresses no sandbox may reach and opens those of an allowed name', async () => {
    const learned: string[][] = []
    const { port, c } = await start(answering(['203.0.113.5', '169.254.169.254']), {
      policyOf: () =>
        policy({
          ruleFor: (n) => (n === 'ok.test' ? { kind: 'allow', rule: 'ok.test' } : null),
          learned: async (_k, _r, ips) => void learned.push(ips),
        }),
    })
    c.send(port, 1, 'ok.test')
    await until('the answer', () => c.answers.has(1))
    const a = c.answers.get(1)
    assert.equal(rcode(a), 0)
    assert.deepEqual(
      a?.answers?.map((x) => ('data' in x ? x.data : null)),
      ['203.0.113.5'],
    )
    assert.deepEqual(learned, [['203.0.113.5']])
  })

  it('asks from a few shared sockets, not one per query', async () => {
    const { up, port, c } = await start(silent, { limits: { upstreamSockets: 2, upstreamTimeoutMs: 5000 } })
    const fds = () => readdirSync('/proc/self/fd').length
    const before = fds()
    for (let i = 0; i < 30; i++) c.send(port, i)
    await until('the queries upstream', () => up.seen.length === 30)
    assert.ok(fds() - before <= 2, `fds grew by ${fds() - before}`)
    assert.ok(new Set(up.seen.map((r) => r.port)).size <= 2)
  })

  it('a sandbox past its in-flight cap gets SERVFAIL at once; another sandbox is unaffected', async () => {
    const { up, port, c, resolver } = await start(silent, { limits: { inFlightPerSandbox: 5, upstreamTimeoutMs: 800 } })
    for (let i = 0; i < 20; i++) c.send(port, i)
    await until('15 refusals', () => c.answers.size === 15)
    assert.ok([...c.answers.values()].every((a) => rcode(a) === SERVFAIL))
    assert.equal(up.seen.length, 5)
    assert.equal(resolver.inFlightTotal, 5)
    const other = await client(OTHER_SANDBOX)
    cleanup.push(() => other.close())
    other.send(port, 99)
    await until('the other sandbox upstream', () => up.seen.length === 6)
    // the held queries time out into SERVFAIL, and the cap is free again
    await until('the timeouts', () => c.answers.size === 20 && resolver.inFlightTotal <= 1, 3000)
    c.send(port, 100)
    await until('a query upstream again', () => up.seen.length === 7)
  })

  it('a sandbox past its rate gets SERVFAIL without asking upstream', async () => {
    const { up, port, c } = await start(answering(['203.0.113.5']), {
      limits: { queriesPerSecond: 10, burst: 20, inFlightPerSandbox: 1000 },
    })
    for (let i = 0; i < 100; i++) c.send(port, i)
    await until('every answer', () => c.answers.size === 100)
    const forwarded = up.seen.length
    assert.ok(forwarded >= 20 && forwarded <= 23, `forwarded ${forwarded}`)
    const refused = [...c.answers.values()].filter((a) => rcode(a) === SERVFAIL).length
    assert.equal(refused, 100 - forwarded)
  })

  it('refusals are rate-capped too; past that queries go unanswered', async () => {
    const { up, port, c } = await start(answering([]), {
      policyOf: () => policy({ internet: false }),
      limits: { refusalsPerSecond: 10 },
    })
    for (let i = 0; i < 50; i++) c.send(port, i)
    await sleep(300)
    assert.ok(c.answers.size >= 10 && c.answers.size <= 14, `answered ${c.answers.size}`)
    assert.ok([...c.answers.values()].every((a) => rcode(a) === REFUSED))
    assert.equal(up.seen.length, 0)
  })

  it('drops answers from elsewhere, with another id or for another question', async () => {
    const forger = createSocket('udp4')
    await new Promise<void>((r) => forger.bind(0, '127.0.0.1', () => r()))
    cleanup.push(() => forger.close())
    const { port, c } = await start((q, rinfo, server) => {
      // the right id from another port, a wrong id, the wrong question, garbage; then the real one
      forger.send(answer(q, ['198.51.100.1']), rinfo.port, rinfo.address)
      server.send(answer(q, ['198.51.100.2'], { id: ((q.id ?? 0) + 1) % 65536 }), rinfo.port, rinfo.address)
      server.send(
        answer(q, ['198.51.100.3'], { questions: [{ type: 'A', name: 'evil.test' }] }),
        rinfo.port,
        rinfo.address,
      )
      server.send(Buffer.from([(q.id ?? 0) >> 8, (q.id ?? 0) & 255, 0x81, 0x80, 0, 9, 0xff]), rinfo.port, rinfo.address)
      setTimeout(() => server.send(answer(q, ['203.0.113.9']), rinfo.port, rinfo.address), 50)
    })
    c.send(port, 7, 'real.test')
    await until('the answer', () => c.answers.has(7))
    assert.deepEqual(
      c.answers.get(7)?.answers?.map((x) => ('data' in x ? x.data : null)),
      ['203.0.113.9'],
    )
  })

  it('malformed packets, failing rules and socket errors end nothing and it keeps answering', async () => {
    let fail = true
    const { port, c, resolver } = await start(answering(['203.0.113.5']), {
      policyOf: () =>
        policy({
          ruleFor: () => ({ kind: 'allow', rule: 'x' }),
          learned: async () => {
            if (fail) throw new Error('nft failed')
          },
        }),
    })
    c.raw(port, Buffer.from('not dns'))
    c.raw(port, Buffer.alloc(12, 0xff))
    c.raw(port, Buffer.from([0, 1, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 1, 2, 3]))
    c.raw(port, Buffer.alloc(4000))
    // a response sent at the resolver is not a query
    c.raw(port, answer({ id: 5, questions: [{ type: 'A', name: 'x.test' }] }, ['1.2.3.4']))
    c.send(port, 1)
    await until('SERVFAIL for the failed rule', () => rcode(c.answers.get(1)) === SERVFAIL)
    assert.equal(c.answers.size, 1)
    const sockets = resolver as unknown as { socket: Socket; outgoing: { socket: Socket }[] }
    sockets.socket.emit('error', new Error('send failed'))
    for (const o of sockets.outgoing) o.socket.emit('error', new Error('send failed'))
    fail = false
    c.send(port, 2)
    await until('the answer', () => rcode(c.answers.get(2)) === 0)
  })

  it('an upstream it cannot send to, or one that stays silent, gives way to the next; none at all is SERVFAIL', async () => {
    const good = await upstream(answering(['203.0.113.5']))
    cleanup.push(() => good.close())
    const { up, port, c } = await start(silent, { limits: { upstreamTimeoutMs: 200 } })
    const r2 = new Resolver({
      upstreams: ['127.0.0.1:0', up.address, good.address],
      policyOf: () => policy(),
      log: () => {},
      limits: { upstreamTimeoutMs: 200 },
    })
    const port2 = await r2.listen()
    cleanup.push(() => r2.close())
    c.send(port2, 1)
    await until('the good answer', () => rcode(c.answers.get(1)) === 0)
    c.send(port, 2)
    await until('SERVFAIL', () => rcode(c.answers.get(2)) === SERVFAIL)
  })

  it('does not answer addresses that are not sandboxes', async () => {
    const { up, port, c } = await start(answering(['203.0.113.5']), { policyOf: () => null })
    c.send(port, 1)
    await sleep(200)
    assert.equal(c.answers.size, 0)
    assert.equal(up.seen.length, 0)
  })

  it('close settles what is in flight and leaves no timer behind', async () => {
    const { up, port, c, resolver } = await start(silent, { limits: { upstreamTimeoutMs: 60_000 } })
    for (let i = 0; i < 5; i++) c.send(port, i)
    await until('the queries upstream', () => up.seen.length === 5)
    resolver.close()
    await until('nothing in flight', () => resolver.inFlightTotal === 0)
    resolver.close()
  })
})
