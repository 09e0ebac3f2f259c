// The control plane: store, services and HTTP app over an agent it is handed.
import type { IncomingMessage } from 'node:http'
import { dirname, join } from 'node:path'
import type { Duplex } from 'node:stream'
import type { AgentApi } from '@forkbox/protocol'
import { sql } from 'kysely'
import pino, { type Logger } from 'pino'
import { ServerConfig, type ServerConfigInput } from './config.ts'
import { E2bTemplateBuilds } from './e2b/template-builds.ts'
import { TemplateFiles } from './e2b/template-files.ts'
import { E2B_TEMPLATE_IDS, forkboxTemplate } from './e2b/template-ids.ts'
import { Fleet } from './fleet/fleet.ts'
import { HostService } from './fleet/hosts-service.ts'
import { HostStore } from './fleet/hosts-store.ts'
import { createApp } from './http/app.ts'
import { Authenticator } from './http/auth.ts'
import type { App } from './http/env.ts'
import { storeDown } from './http/errors.ts'
import { upgradeListener } from './http/upgrade.ts'
import { Metrics, SAMPLE_INTERVAL_MS } from './metrics.ts'
import { CodeService } from './services/code.ts'
import { ExecService } from './services/exec.ts'
import { FileService } from './services/files.ts'
import { QuotaGuard } from './services/quotas.ts'
import { SandboxCalls } from './services/sandbox-calls.ts'
import { SandboxEvents } from './services/sandbox-events.ts'
import { SandboxRecovery } from './services/sandbox-recovery.ts'
import { SandboxService } from './services/sandboxes.ts'
import { TemplateService } from './services/templates.ts'
import { AuditStore } from './store/audit.ts'
import { openStore } from './store/db.ts'
import { KeyStore } from './store/keys.ts'
import { RateLimiter } from './store/rate-limits.ts'
import { RegistryCredentialStore } from './store/registry-credentials.ts'
import { SandboxStore } from './store/sandboxes.ts'
import { loadServerSecret } from './store/secret.ts'
import { SnapshotStore } from './store/snapshots.ts'
import { TemplateStore } from './store/templates.ts'
import { UsageStore } from './store/usage.ts'

const HOSTS_CHANNEL = 'forkbox_hosts'

/** The advisory lock the replica running the reapers holds (any fixed number: it names the lock). */
const REAPER_LOCK = 0x66627872

/** An ended sandbox still placed this long after its end had its stop fail: the leader stops it again. */
const ENDED_STOP_RETRY_MS = 15_000

export interface ControlPlane {
  app: App
  /** For the HTTP server's 'upgrade' event (terminals, exposed ports): the app's routes answer it. */
  upgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void
  sandboxes: SandboxService
  keys: KeyStore
  /** A new admin key when the store had none; shown once. */
  bootstrapKey: string | null
  /** The control plane's logger, for what its host process reports. */
  log: Logger
  close(): Promise<void>
}

/**
 * With `agent`, the control plane drives that one agent (`forkbox up`); without, it drives the
 * fleet of hosts that join it (`forkbox server`), any number of replicas sharing one store.
 */
export async function createControlPlane(opts: {
  config: ServerConfigInput
  agent?: AgentApi
  log?: Logger
}): Promise<ControlPlane> {
  const config = ServerConfig.parse(opts.config)
  const log = opts.log ?? pino({ level: config.logLevel })
  const {
    db,
    dialect,
    session,
    close: closeStore,
  } = await openStore({
    path: config.dbPath,
    url: config.databaseUrl,
    log,
  })
  const keys = new KeyStore(db)
  const secret = loadServerSecret(config.secretPath ?? join(dirname(config.dbPath), 'server.secret'))
  const hostStore = new HostStore(db)
  const fleet = opts.agent ? null : new Fleet(hostStore, secret, { graceMs: config.hostGraceSeconds * 1000, log })
  const agent: AgentApi = opts.agent ?? (fleet as Fleet)
  const hosts = fleet ? new HostService(hostStore, fleet, secret, config.joinToken, log) : null
  const auth = new Authenticator(keys, secret)
  const registries = new RegistryCredentialStore(db, secret)
  const store = new SandboxStore(db, dialect, session)
  const snapshots = new SnapshotStore(db)
  const templateStore = new TemplateStore(db)
  const quotas = new QuotaGuard(db, keys, snapshots, templateStore)
  const templates = new TemplateService({
    store: templateStore,
    agent,
    log,
    limits: {
      maxConcurrentBuilds: config.maxConcurrentBuilds,
      maxContextBytes: config.maxContextBytes,
      contextsDir: join(dirname(config.dbPath), 'build-contexts'),
      ceilingTemplate: 'base',
      admitBuild: (owner) => quotas.checkBuilds(owner),
      admitBuilt: (owner, sizeBytes) => quotas.checkTemplateBytes(owner, sizeBytes),
      templateBytesRoom: (owner) => quotas.templateBytesRoom(owner),
      // read at each build: a key's scopes may change after the request authenticated it
      scopesOf: async (owner) => (await keys.get(owner).catch(() => null))?.scopes ?? {},
    },
    inUse: store,
    registries,
  })
  // a fleet's other replicas may be building: their builds are theirs to finish
  await templates.recover({ shared: fleet !== null })
  const e2bTemplates = new E2bTemplateBuilds(
    templates,
    new TemplateFiles(join(dirname(config.dbPath), 'e2b-template-files'), config.maxContextBytes),
    join(dirname(config.dbPath), 'build-contexts'),
    forkboxTemplate,
    E2B_TEMPLATE_IDS,
  )
  const metrics = new Metrics(store, agent)
  const sandboxes = new SandboxService({
    store,
    agent,
    log,
    limits: {
      maxSandboxes: config.maxSandboxes,
      idleTimeoutMs: config.idleTimeoutSeconds * 1000,
      idleAction: config.idleAction,
      freezeAfterMs: config.freezeAfterSeconds * 1000,
      sandboxDomain: config.sandboxDomain,
      fleet: fleet !== null,
      movingRetryMs: config.movingRetrySeconds * 1000,
      quotas,
    },
    snapshots,
    auth,
    metrics,
    templates,
  })
  const recovery = new SandboxRecovery({
    store,
    agent,
    snapshots,
    log,
    isWaking: (id) => sandboxes.hibernation.isWaking(id),
  })
  const events = new SandboxEvents(store)
  const calls = new SandboxCalls({
    sandboxes,
    store,
    agent,
    auth,
    fleet: fleet !== null,
    movingRetryMs: config.movingRetrySeconds * 1000,
  })
  /** Sandboxes `ids` placed on `host` against what it runs: kept, re-attached, or errored and unplaced. */
  const reconcileOn = async (host: string, ids: string[]) => {
    if (!fleet) return
    const remote = await fleet.agentOf(host)
    const gone = await recovery.reconcileHost(host, ids, await remote.liveIds(), remote)
    for (const id of gone) await hostStore.unplace(id)
  }
  // a fleet's hosts reconcile as each joins (a replica starting finds others mid-create)
  if (!fleet) await recovery.recover()
  if (fleet && hosts) {
    hosts.migrate = (id) => sandboxes.hibernation.migrate(id)
    hosts.onJoined = async (hostId) => {
      const remote = await fleet.agentOf(hostId)
      await remote.registerTemplates(await templates.readySpecs())
      await reconcileOn(hostId, await hostStore.placedOn(hostId, 'sandbox'))
    }
    if (session) {
      // a cordon or a join made through another replica counts here at once, not after the cache
      await session.listen(HOSTS_CHANNEL, () => fleet.forgetHosts())
      hosts.announce = async () => {
        await sql`select pg_notify(${HOSTS_CHANNEL}, '')`.execute(db)
      }
    }
  }
  const bootstrapKey = (await keys.count()) === 0 ? (await keys.create({ name: 'admin', admin: true })).key : null
  const code = new CodeService({ calls, metrics })
  const files = new FileService({ calls })
  const exec = new ExecService({ calls, events, metrics })
  const audit = new AuditStore(db)
  const usage = new UsageStore(db, dialect)
  metrics.meterUsage(usage)
  const rateLimiter = new RateLimiter(db, dialect)
  const app = createApp({
    sandboxes,
    events,
    calls,
    files,
    code,
    exec,
    metrics,
    keys,
    audit,
    usage,
    rateLimiter,
    auth,
    config,
    log,
    templates,
    registries,
    e2bTemplates,
    hosts,
  })
  // the agents' usage, read once a sample: the metrics' rings, and (the leader) the usage periods' egress
  const sampler = setInterval(() => {
    metrics
      .sample()
      .then((live) =>
        leading ? usage.recordEgress(live.map((u) => ({ id: u.id, txBytes: u.networkTxBytes }))) : undefined,
      )
      .catch((err: unknown) =>
        storeDown(err)
          ? log.debug({ err: String(err) }, 'metrics sampling: the store is unavailable')
          : log.error({ err }, 'metrics sampling failed'),
      )
  }, SAMPLE_INTERVAL_MS)
  sampler.unref()
  let lastPrune = 0
  let lastStoreFailure = 0
  // one pass at a time: a slow store never stacks passes up
  let reaping: Promise<void> | null = null
  /**
   * The leader's look at the hosts, each pass: sandboxes of a host that went silent are `lost`;
   * lost ones of a host that answers again are running again if it still runs them, else errored.
   */
  const watchHosts = async () => {
    if (!fleet) return
    fleet.forgetHosts()
    // right after the store was out, or this replica became the leader (its session to the store
    // had dropped, perhaps with the store), no host could heartbeat: silence then says nothing
    const since = Math.max(lastStoreFailure, leadingSince)
    const silent = new Set(Date.now() - since < config.hostGraceSeconds * 1000 ? [] : await fleet.silentHosts())
    for (const host of silent) await recovery.loseAll(host, await hostStore.placedOn(host, 'sandbox'))
    const lost = new Map<string, string[]>()
    for (const { id, host } of await hostStore.lostSandboxes())
      if (!silent.has(host)) lost.set(host, [...(lost.get(host) ?? []), id])
    for (const [host, ids] of lost) await reconcileOn(host, ids)
    for (const { id, host } of await hostStore.endedButPlaced(new Date(Date.now() - ENDED_STOP_RETRY_MS))) {
      if (silent.has(host)) continue
      log.warn({ sandboxId: id, host }, 'an ended sandbox is still placed (its stop failed): stopping it again')
      await fleet.stop(id).catch((err: unknown) => log.warn({ sandboxId: id, err: String(err) }, 'stopping it failed'))
    }
  }
  // replicas sharing a store take turns by a lock: one reaps at a time, and another takes over
  // within a pass when it dies (its session, and so its lock, ends with it)
  let leadingSince = 0
  let leading = false
  const leads = async () => {
    const now = session ? await session.lead(REAPER_LOCK) : true
    if (now && !leading) leadingSince = Date.now()
    leading = now
    return now
  }
  const reaper = setInterval(() => {
    if (reaping) return
    const pass = async () => {
      if (fleet) await sandboxes.shareActivity()
      if (!(await leads())) return
      if (fleet) {
        await watchHosts()
        await recovery.sweepStuck(config.startingTimeoutSeconds * 1000)
        await templates.failLapsed()
      }
      await sandboxes.reap()
      if (Date.now() - lastPrune > 60_000) {
        lastPrune = Date.now()
        await events.pruneEvents(new Date(Date.now() - config.eventRetentionHours * 3600_000))
        await audit.prune(new Date(Date.now() - config.auditRetentionDays * 24 * 3600_000))
        await rateLimiter.prune(3600_000)
        await templates.collect().catch((err: unknown) => log.error({ err }, 'removing deleted templates failed'))
        e2bTemplates.sweep()
      }
    }
    reaping = pass()
      .catch((err: unknown) => {
        if (!storeDown(err)) return log.error({ err }, 'reaper failed')
        lastStoreFailure = Date.now()
        log.warn({ err: String(err) }, 'reaper: the store is unavailable')
      })
      .finally(() => {
        reaping = null
      })
  }, config.reaperIntervalMs)
  reaper.unref()
  return {
    app,
    upgrade: upgradeListener(app),
    sandboxes,
    keys,
    bootstrapKey,
    log,
    async close() {
      clearInterval(reaper)
      clearInterval(sampler)
      await reaping
      await templates.drain()
      await sandboxes.drain()
      await fleet?.close()
      await closeStore()
    },
  }
}

export { ServerConfig, type ServerConfigInput } from './config.ts'
