// `forkbox agent`: one host of a fleet. Its sandboxes are served to the control plane over an
// authenticated WebSocket; it joins with the join token, then heartbeats its capacity.
import { chmodSync, mkdirSync, statfsSync } from 'node:fs'
import { createServer } from 'node:http'
import { cpus, hostname, totalmem } from 'node:os'
import { agentRpcServer, defaultAgentConfig, LocalAgent, sendSlots, serveImage } from '@forkbox/agent'
import { type HostCapacity, JoinHostResponse, type TemplateProgress } from '@forkbox/protocol'
import pino from 'pino'
import { type AgentHostConfig, type AgentHostOptions, agentSettingsOf, loadAgentHostConfig } from './config.ts'
import { listen } from './listen.ts'

export const AGENT_VERSION = '0.1.0'

export interface AgentHost {
  /** Where the control plane reaches it. */
  url: string
  port: number
  hostId: string
  config: AgentHostConfig
  /** Resolves once it has joined (again, after a control plane lost it). */
  joined(): Promise<void>
  close(): Promise<void>
}

function hostIdOf(config: AgentHostConfig): string {
  if (config.hostId) return config.hostId
  const id = hostname()
    .toLowerCase()
    .replace(/[^a-z0-9.-]/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .slice(0, 63)
  return id || 'host'
}

/** Images this host sends to others at once (each a disk read and a network stream); more wait. */
const IMAGE_SENDS = 4

export async function startAgentHost(
  opts: Partial<AgentHostOptions> & { onTemplateProgress?: (p: TemplateProgress) => void } = {},
): Promise<AgentHost> {
  const { onTemplateProgress, ...rest } = opts
  const config = loadAgentHostConfig(rest)
  const log = pino({ level: config.logLevel })
  const hostId = hostIdOf(config)
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
  chmodSync(config.dataDir, 0o700)
  // a fleet host: what it builds may be copied to other hosts, checked against the record it makes
  const agent = new LocalAgent(
    defaultAgentConfig({ ...agentSettingsOf(config), imageStore: config.imageStore, recordRootfsDigests: true }),
  )
  await agent.reconcile()
  for (const t of config.prebuild) await agent.ensureTemplate(t, onTemplateProgress)

  let credential: string | null = null
  const rpc = agentRpcServer(agent, {
    credential: () => credential,
    onError: (err) => log.warn({ err }, 'control-plane connection failed'),
  })
  const slots = sendSlots(IMAGE_SENDS)
  const server = createServer((req, res) => {
    const exportImage = (id: string, skip: number) => agent.exportSnapshot(id, skip)
    const exportRootfs = (name: string, skip: number) => agent.exportRootfs(name, skip)
    if (serveImage(req, res, { credential: () => credential, exportImage, exportRootfs, slots })) return
    if (req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true, hostId }))
      return
    }
    res.writeHead(404).end()
  })
  server.on('upgrade', rpc.upgrade)
  const bound = await listen(server, config.port, config.host)
  const port = bound.port
  const url = config.advertiseUrl ?? bound.url

  const capacity = async (): Promise<HostCapacity> => {
    const fs = statfsSync(config.dataDir)
    const [live, templates, pool] = await Promise.all([agent.liveIds(), agent.templates(), agent.poolSizes()])
    return {
      vcpus: cpus().length,
      memoryBytes: totalmem(),
      diskFreeBytes: Number(fs.bavail) * Number(fs.bsize),
      maxSandboxes: config.maxSandboxes,
      sandboxes: live.length,
      templates: templates.filter((t) => t.ready).map((t) => t.name),
      pool,
      imageStore: agent.imageStoreId,
    }
  }
  const post = (path: string, auth: string, body: unknown, signal: AbortSignal) =>
    fetch(new URL(path, config.controlPlaneUrl), {
      method: 'POST',
      headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal,
    })

  const stopping = new AbortController()
  let intervalMs = 2_000
  let joinedNow: Promise<void> | null = null
  const join = async (): Promise<void> => {
    for (let attempt = 0; !stopping.signal.aborted; attempt++) {
      try {
        const res = await post(
          '/v1/hosts/join',
          config.joinToken,
          { id: hostId, url, version: AGENT_VERSION, capacity: await capacity() },
          AbortSignal.any([stopping.signal, AbortSignal.timeout(10_000)]),
        )
        if (res.ok) {
          const joined = JoinHostResponse.parse(await res.json())
          credential = joined.credential
          intervalMs = joined.heartbeatIntervalMs
          log.info({ hostId, url, controlPlane: config.controlPlaneUrl }, 'joined the control plane')
          return
        }
        log.warn({ status: res.status, body: await res.text() }, 'the control plane refused the join')
      } catch (err) {
        if (stopping.signal.aborted) return
        log.warn({ err }, 'joining the control plane failed')
      }
      await new Promise((r) => setTimeout(r, Math.min(500 * 2 ** attempt, 5_000)))
    }
  }
  const joined = () => {
    joinedNow ??= join().finally(() => {
      joinedNow = null
    })
    return joinedNow
  }
  await joined()
  let beating = false
  const heartbeat = setInterval(() => {
    if (beating || joinedNow || !credential) return
    beating = true
    const beat = async () => {
      const res = await post(
        `/v1/hosts/${hostId}/heartbeat`,
        credential ?? '',
        { capacity: await capacity() },
        AbortSignal.any([stopping.signal, AbortSignal.timeout(10_000)]),
      )
      // forgotten, or joined again elsewhere with a new credential: join again
      if (res.status === 401) await joined()
      else if (!res.ok) log.warn({ status: res.status }, 'heartbeat refused')
    }
    beat()
      .catch((err: unknown) => {
        if (!stopping.signal.aborted) log.warn({ err }, 'heartbeat failed')
      })
      .finally(() => {
        beating = false
      })
  }, intervalMs)
  heartbeat.unref()

  return {
    url,
    port,
    hostId,
    config,
    joined: () => joinedNow ?? Promise.resolve(),
    async close() {
      stopping.abort()
      clearInterval(heartbeat)
      rpc.close()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await agent.close()
    },
  }
}
