import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { baseScript, policyScript, type SlotRules } from '../src/network/firewall.ts'
import { cidrContains, inAny, ipToNumber, parseCidr } from '../src/network/ipv4.ts'
import { nameMatches } from '../src/network/resolver.ts'

describe('IPv4 blocks', () => {
  it('parses addresses and CIDRs, clearing host bits, and rejects the rest', () => {
    assert.deepEqual(parseCidr('203.0.113.7/24'), { base: ipToNumber('203.0.113.0'), prefix: 24 })
    assert.deepEqual(parseCidr('10.0.0.1'), { base: ipToNumber('10.0.0.1'), prefix: 32 })
    for (const bad of ['10.0.0.1/33', '10.0.0/8', 'example.com', '::1', '1.2.3.4/', '1.2.3.4/x'])
      assert.equal(parseCidr(bad), null, bad)
  })
  it('knows what is inside a block', () => {
    const c = parseCidr('169.254.0.0/16')
    assert.ok(c && cidrContains(c, ipToNumber('169.254.169.254')))
    assert.ok(c && !cidrContains(c, ipToNumber('169.255.0.1')))
    assert.ok(inAny('10.1.2.3', ['192.168.0.0/16', '10.0.0.0/8']))
    assert.ok(!inAny('203.0.113.1', ['192.168.0.0/16', '10.0.0.0/8']))
  })
})

describe('name rules', () => {
  it('matches the name itself, or names under a *. rule, case and trailing dot aside', () => {
    assert.ok(nameMatches('Example.COM.', 'example.com'))
    assert.ok(!nameMatches('api.example.com', 'example.com'))
    assert.ok(nameMatches('api.example.com', '*.example.com'))
    assert.ok(!nameMatches('example.com', '*.example.com'))
    assert.ok(!nameMatches('badexample.com', '*.example.com'))
  })
})

describe('nftables rules', () => {
  const names = { table: 'forkbox_t', ifacePrefix: 'fxt' }
  const rules: SlotRules = {
    slot: 3,
    iface: 'fxt3',
    address: '10.9.0.14',
    internet: true,
    allowCidrs: ['203.0.113.0/24'],
    denyCidrs: [],
    allowResolved: ['198.51.100.7'],
    denyResolved: [],
    allowListed: true,
    generation: 255,
  }
  it('a closed sandbox gets nothing but the refusal, and no DNS', () => {
    const s = policyScript(names, { ...rules, internet: false })
    assert.match(s, /delete element inet forkbox_t dns \{ "fxt3" \}/)
    assert.deepEqual(
      s.split('\n').filter((l) => l.startsWith('add rule')),
      ['add rule inet forkbox_t sbx3 goto refuse'],
    )
  })
  it('always-blocked checks come before the allow-list, which ends in refusal', () => {
    const lines = policyScript(names, rules)
      .split('\n')
      .filter((l) => l.startsWith('add rule'))
    const at = (needle: string) => lines.findIndex((l) => l.includes(needle))
    assert.ok(at('@always') >= 0 && at('@always') < at('@allow3'))
    assert.ok(at('@private') < at('@allow3') && at('@mining') < at('@allow3'))
    assert.match(lines.at(-2) ?? '', /ct mark set 0xff accept/)
    assert.equal(lines.at(-1), 'add rule inet forkbox_t sbx3 goto refuse')
  })
  it('without an allow-list there is no allow check', () => {
    const s = policyScript(names, { ...rules, allowCidrs: [], allowResolved: [], allowListed: false })
    assert.doesNotMatch(s, /@allow3/)
  })
  it('the base table blocks the metadata range, the host and its own subnet, and redirects DNS', () => {
    const s = baseScript({
      ...names,
      subnet: '10.9.0.0/16',
      hostBlocks: ['192.0.2.2/32'],
      operatorAllowed: [],
      dnsPort: 5300,
    })
    assert.match(s, /set always \{[^}]*169\.254\.0\.0\/16[^}]*10\.9\.0\.0\/16[^}]*192\.0\.2\.2\/32/)
    assert.match(s, /th dport 53 redirect to :5300/)
  })
})
