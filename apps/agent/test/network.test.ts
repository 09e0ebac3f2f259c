import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { addSlotScript, baseScript, policyScript, type SlotRules } from '../src/network/firewall.ts'
import { blockListOf, blockRange, contains, ipToNumber, splitCidr } from '../src/network/ipv4.ts'
import { nameMatches } from '../src/network/resolver.ts'

describe('IPv4 blocks', () => {
  it('splits addresses and CIDRs, and rejects the rest', () => {
    assert.deepEqual(splitCidr('203.0.113.7/24'), { address: '203.0.113.7', prefix: 24 })
    assert.deepEqual(splitCidr('10.0.0.1'), { address: '10.0.0.1', prefix: 32 })
    for (const bad of ['10.0.0.1/33', '10.0.0/8', 'example.com', '::1', '1.2.3.4/', '1.2.3.4/x', '1.2.3.4/-1'])
      assert.equal(splitCidr(bad), null, bad)
  })
  it('knows what is inside a block, host bits aside', () => {
    const list = blockListOf(['169.254.0.0/16', '203.0.113.7/24', 'example.com'])
    assert.ok(contains(list, '169.254.169.254'))
    assert.ok(contains(list, '203.0.113.200'))
    assert.ok(!contains(list, '169.255.0.1'))
    assert.ok(!contains(list, '203.0.114.1'))
    assert.ok(!contains(list, 'example.com'))
    assert.ok(!contains(blockListOf([]), '10.0.0.1'))
  })
  it('cuts the slot pool from the block, host bits cleared', () => {
    assert.deepEqual(blockRange('10.9.3.4/16'), { first: ipToNumber('10.9.0.0'), size: 65536 })
    assert.deepEqual(blockRange('10.9.0.0/28'), { first: ipToNumber('10.9.0.0'), size: 16 })
    assert.equal(blockRange('not-a-block'), null)
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

/** The statements of a chain in a table script, in order. */
function chainBody(script: string, chain: string): string[] {
  const lines = script.split('\n').map((l) => l.trim())
  const start = lines.indexOf(`chain ${chain} {`)
  assert.ok(start >= 0, `no chain ${chain}`)
  const end = lines.indexOf('}', start)
  return lines.slice(start + 1, end)
}

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
  const ruleLines = (script: string) => script.split('\n').filter((l) => l.startsWith('add rule'))
  const chainRules = (...bodies: string[]) => bodies.map((b) => `add rule inet forkbox_t sbx3 ${b}`)
  /** An open, allow-listed sandbox's chain, every rule in order. */
  const openRules = chainRules(
    'ct state established,related ct mark 0xff accept',
    'ip daddr @always goto refuse',
    'ip daddr @private ip daddr != @operator goto refuse',
    'tcp dport @mining goto refuse',
    'udp dport @mining goto refuse',
    'ip daddr @deny3 goto refuse',
    'ip daddr @denydns3 goto refuse',
    'ip daddr != @allow3 ip daddr != @allowdns3 goto refuse',
    'ct mark set 0xff accept',
    'goto refuse',
  )

  it('a closed sandbox gets nothing but the refusal; its lookups reach the resolver (which refuses them at once)', () => {
    const s = policyScript(names, { ...rules, internet: false })
    assert.match(s, /add element inet forkbox_t dns \{ "fxt3" \}/)
    assert.doesNotMatch(s, /delete element/)
    assert.deepEqual(ruleLines(s), chainRules('goto refuse'))
  })
  it('an allow-listed sandbox: every check in order, always-blocked before the allow-list, ending in refusal', () => {
    const s = policyScript(names, rules)
    assert.deepEqual(ruleLines(s), openRules)
    assert.deepEqual(
      s.split('\n').filter((l) => l.startsWith('add element')),
      [
        'add element inet forkbox_t dns { "fxt3" }',
        'add element inet forkbox_t allow3 { 203.0.113.0/24 }',
        'add element inet forkbox_t allowdns3 { 198.51.100.7 }',
      ],
    )
  })
  it('without an allow-list there is no allow check, and the rest stays', () => {
    const s = policyScript(names, { ...rules, allowCidrs: [], allowResolved: [], allowListed: false })
    const withoutAllow = openRules.filter((l) => !l.includes('@allow3'))
    assert.equal(withoutAllow.length, openRules.length - 1)
    assert.deepEqual(ruleLines(s), withoutAllow)
  })
  it('a new slot is closed until its policy opens it', () => {
    const s = addSlotScript(names, 3, 'fxt3', '10.9.0.14')
    assert.deepEqual(ruleLines(s), chainRules('goto refuse'))
    assert.match(s, /add element inet forkbox_t addrs \{ "fxt3" \. 10\.9\.0\.14 \}/)
    assert.match(s, /add element inet forkbox_t egress \{ "fxt3" : jump sbx3 \}/)
    // its lookups reach the resolver from the start (which refuses them while it is closed)
    assert.match(s, /add element inet forkbox_t dns \{ "fxt3" \}/)
  })
  it('the base table: metadata, host and own subnet blocked, spoofing and IPv6 dropped, DNS redirected, each chain in order', () => {
    const s = baseScript({
      ...names,
      subnet: '10.9.0.0/16',
      hostBlocks: ['192.0.2.2/32'],
      operatorAllowed: [],
      dnsPort: 5300,
    })
    assert.match(s, /set always \{[^}]*169\.254\.0\.0\/16[^}]*10\.9\.0\.0\/16[^}]*192\.0\.2\.2\/32/)
    const sbx = '"fxt*"'
    assert.deepEqual(chainBody(s, 'refuse'), [
      'meta l4proto tcp reject with tcp reset',
      'reject with icmpx admin-prohibited',
    ])
    assert.deepEqual(chainBody(s, 'guard'), [
      'type filter hook prerouting priority -150; policy accept;',
      `iifname ${sbx} meta nfproto ipv6 drop`,
      `iifname ${sbx} iifname . ip saddr != @addrs drop`,
    ])
    assert.deepEqual(chainBody(s, 'dns_redirect'), [
      'type nat hook prerouting priority dstnat; policy accept;',
      `iifname ${sbx} meta l4proto { tcp, udp } th dport 53 redirect to :5300`,
    ])
    assert.deepEqual(chainBody(s, 'masquerade_out'), [
      'type nat hook postrouting priority srcnat; policy accept;',
      `ip saddr 10.9.0.0/16 oifname != ${sbx} masquerade`,
    ])
    assert.deepEqual(chainBody(s, 'to_host'), [
      'type filter hook input priority filter; policy accept;',
      `iifname != ${sbx} udp dport 5300 drop`,
      `iifname != ${sbx} accept`,
      'ct state established,related accept',
      'iifname @dns udp dport 5300 accept',
      'goto refuse',
    ])
    assert.deepEqual(chainBody(s, 'through_host'), [
      'type filter hook forward priority filter; policy accept;',
      `oifname ${sbx} ct state established,related accept`,
      `oifname ${sbx} drop`,
      `iifname ${sbx} jump egress_of`,
    ])
    assert.deepEqual(chainBody(s, 'egress_of'), ['iifname vmap @egress', 'goto refuse'])
  })
})
