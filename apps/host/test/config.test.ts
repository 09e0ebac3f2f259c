import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { defaultAgentConfig } from '@forkbox/agent'
import { ServerConfig } from '@forkbox/server'
import { HostConfig, loadHostConfig, loadServerHostConfig, ServerHostConfig, serverSettingsOf } from '../src/config.ts'

describe('host config', () => {
  it("takes the agent's and the server's defaults from their own schemas", () => {
    const c = loadHostConfig({}, {})
    const agent = defaultAgentConfig()
    const server = ServerConfig.parse({ dbPath: '/x' })
    for (const k of ['dataDir', 'runscPath', 'runscStateDir', 'cgroupParent', 'poolSize', 'networkSubnet'] as const)
      assert.equal(c[k], agent[k], k)
    for (const k of ['logLevel', 'maxSandboxes', 'idleTimeoutSeconds', 'idleAction', 'sandboxDomain'] as const)
      assert.equal(c[k], server[k], k)
    assert.deepEqual([c.port, c.host, c.prebuild], [7411, '127.0.0.1', ['base', 'code-interpreter']])
    assert.equal(c.templatesDir, undefined, 'the agent puts it under the data dir')
  })

  it('reads env text as the values the schemas check; options win over env', () => {
    const c = loadHostConfig(
      { poolSize: 1 },
      {
        FORKBOX_PORT: '8080',
        FORKBOX_POOL_SIZE: '5',
        FORKBOX_PORTS_PATH_ROUTE: '1',
        FORKBOX_PREBUILD: 'base, ',
        FORKBOX_DNS_UPSTREAMS: '192.0.2.53,192.0.2.54:5353',
        FORKBOX_NETWORK_ALLOW_PRIVATE: '10.1.0.0/16',
        FORKBOX_INSECURE_REGISTRIES: 'registry.lan:5000, 10.0.0.5',
        FORKBOX_IDLE_ACTION: 'kill',
        FORKBOX_LOG_LEVEL: '',
      },
    )
    assert.equal(c.port, 8080)
    assert.equal(c.poolSize, 1)
    assert.equal(c.portsPathRoute, true)
    assert.deepEqual(c.prebuild, ['base'])
    assert.deepEqual(c.dnsUpstreams, ['192.0.2.53:53', '192.0.2.54:5353'])
    assert.deepEqual(c.networkAllowPrivate, ['10.1.0.0/16'])
    assert.deepEqual(c.insecureRegistries, ['registry.lan:5000', '10.0.0.5'])
    assert.equal(c.idleAction, 'kill')
    assert.equal(c.logLevel, 'info')
  })

  it('refuses what its owner would refuse', () => {
    assert.throws(() => loadHostConfig({}, { FORKBOX_PORT: 'eighty' }), /port/)
    assert.throws(() => loadHostConfig({}, { FORKBOX_POOL_SIZE: '65' }), /poolSize/)
    assert.throws(() => loadHostConfig({}, { FORKBOX_CGROUP_PARENT: '../x' }), /cgroupParent/)
    assert.throws(() => loadHostConfig({}, { FORKBOX_PORTS_PATH_ROUTE: 'maybe' }), /portsPathRoute/)
    assert.throws(() => loadHostConfig({}, { FORKBOX_INSECURE_REGISTRIES: 'http://x' }), /insecureRegistries/)
  })
})

describe('server host config', () => {
  const serverFields = (schema: { shape: object }) => Object.keys(schema.shape).filter((k) => k in ServerConfig.shape)

  it('takes every server setting `forkbox up` takes, checked and read from env alike', () => {
    const up = serverFields(HostConfig)
    assert.ok(up.length >= 12, 'the server settings of `forkbox up`')
    for (const k of up) {
      assert.ok(k in ServerHostConfig.shape, `a replica lacks ${k}`)
      // a replica's cap is the fleet's, its own default
      if (k !== 'maxSandboxes')
        assert.equal(
          ServerHostConfig.shape[k as keyof typeof ServerHostConfig.shape],
          HostConfig.shape[k as keyof typeof HostConfig.shape],
          k,
        )
    }
    assert.deepEqual([loadHostConfig({}, {}).maxSandboxes, loadServerHostConfig({}, {}).maxSandboxes], [150, 100_000])
  })

  it("keeps a replica's own settings out of `forkbox up`", () => {
    const env = { FORKBOX_SECRET_FILE: '/s', FORKBOX_JOIN_TOKEN: 'x'.repeat(16), FORKBOX_HOST_GRACE_SECONDS: '3' }
    const up = loadHostConfig({}, env)
    for (const k of ['secretPath', 'joinToken', 'hostGraceSeconds', 'startingTimeoutSeconds']) assert.ok(!(k in up), k)
    const replica = loadServerHostConfig({}, env)
    assert.deepEqual([replica.secretPath, replica.joinToken, replica.hostGraceSeconds], ['/s', 'x'.repeat(16), 3])
  })

  it('passes each server setting it has to the server, its database in the data dir', () => {
    const replica = loadServerHostConfig({ dataDir: '/d', idleAction: 'kill', joinToken: 'x'.repeat(16) }, {})
    const server = ServerConfig.parse(serverSettingsOf(replica))
    for (const k of serverFields(ServerHostConfig))
      assert.deepEqual(server[k as keyof typeof server], replica[k as keyof typeof replica], k)
    assert.equal(server.dbPath, '/d/forkbox.db')
  })
})

describe('agent config', () => {
  it('puts the templates under the data dir unless told otherwise', () => {
    assert.equal(defaultAgentConfig({ dataDir: '/d' }).templatesDir, '/d/templates')
    assert.equal(defaultAgentConfig({ dataDir: '/d', templatesDir: '/t' }).templatesDir, '/t')
  })
})
