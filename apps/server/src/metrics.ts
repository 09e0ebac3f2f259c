// Prometheus metrics (prom-client, one registry per control plane) and each sandbox's recent
// CPU and memory, sampled into a short ring for `GET /v1/sandboxes/{id}/metrics`.
import type { AgentApi, SandboxUsage, UsageFigures } from '@forkbox/protocol'
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client'
import type { SandboxStore } from './store/sandboxes.ts'
import type { UsageStore } from './store/usage.ts'

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]
/** Samples kept per sandbox: 10 minutes at one per 5 s. */
const SAMPLES = 120
export const SAMPLE_INTERVAL_MS = 5000

export interface UsageSample {
  at: string
  cpuSeconds: number
  memoryBytes: number
  networkRxBytes: number
  networkTxBytes: number
}

export class Metrics {
  readonly registry = new Registry()
  readonly createSeconds: Histogram<'template' | 'from'>
  readonly forkSeconds: Histogram<'count'>
  readonly wakeSeconds: Histogram
  readonly execSeconds: Histogram<'kind'>
  readonly errors: Counter<'code'>
  private readonly samples = new Map<string, UsageSample[]>()

  /**
   * Each key's usage as counters (`forkbox_usage_*_total{key}`), read from the store at each
   * scrape: every replica reports the same totals (sum with `max by (key)`, not `sum`).
   */
  meterUsage(usage: UsageStore): void {
    const registers = [this.registry]
    const counters: [keyof UsageFigures, string, string][] = [
      ['vcpuSeconds', 'forkbox_usage_vcpu_seconds_total', 'vCPU-seconds its sandboxes held (starting or running)'],
      ['memoryGiBSeconds', 'forkbox_usage_memory_gib_seconds_total', 'GiB-seconds of memory its sandboxes held'],
      ['egressBytes', 'forkbox_usage_egress_bytes_total', 'Bytes its sandboxes sent out'],
      ['snapshotGiBSeconds', 'forkbox_usage_snapshot_gib_seconds_total', 'GiB-seconds of snapshots it kept'],
      ['sandboxSeconds', 'forkbox_usage_sandbox_seconds_total', 'Seconds its sandboxes were live'],
    ]
    // one read of the store per scrape, shared by the five counters
    let read: { at: number; totals: Promise<Map<string, UsageFigures>> } | null = null
    const totals = () => {
      if (!read || performance.now() - read.at > 1000) read = { at: performance.now(), totals: usage.totals() }
      return read.totals
    }
    for (const [field, name, help] of counters)
      new Counter({
        name,
        help: `Per API key: ${help}`,
        labelNames: ['key'],
        registers,
        async collect() {
          const all = await totals()
          this.reset()
          for (const [key, f] of all) this.inc({ key }, f[field])
        },
      })
  }

  constructor(store: SandboxStore, agent: AgentApi) {
    const registers = [this.registry]
    collectDefaultMetrics({ register: this.registry, prefix: 'forkbox_process_' })
    this.createSeconds = new Histogram({
      name: 'forkbox_sandbox_create_seconds',
      help: 'Time to create a sandbox until it answers (pool claim, restore or boot)',
      labelNames: ['template', 'from'],
      buckets: LATENCY_BUCKETS,
      registers,
    })
    this.forkSeconds = new Histogram({
      name: 'forkbox_sandbox_fork_seconds',
      help: 'Time to fork a sandbox (checkpoint and all restores)',
      labelNames: ['count'],
      buckets: LATENCY_BUCKETS,
      registers,
    })
    this.wakeSeconds = new Histogram({
      name: 'forkbox_sandbox_wake_seconds',
      help: 'Time to wake (restore) a hibernated sandbox',
      buckets: LATENCY_BUCKETS,
      registers,
    })
    this.execSeconds = new Histogram({
      name: 'forkbox_exec_seconds',
      help: 'Duration of commands (exec) and code cells (code) as the control plane saw them',
      labelNames: ['kind'],
      buckets: LATENCY_BUCKETS,
      registers,
    })
    this.errors = new Counter({
      name: 'forkbox_api_errors_total',
      help: 'API error responses by error code',
      labelNames: ['code'],
      registers,
    })
    new Gauge({
      name: 'forkbox_sandboxes',
      help: 'Sandboxes by state and template',
      labelNames: ['state', 'template'],
      registers,
      async collect() {
        this.reset()
        for (const r of await store.countByState()) this.set({ state: r.state, template: r.template }, r.n)
      },
    })
    new Gauge({
      name: 'forkbox_pool_size',
      help: 'Restored, never-used sandboxes ready per template',
      labelNames: ['template'],
      registers,
      async collect() {
        const sizes = await agent.poolSizes()
        this.reset()
        for (const [template, n] of Object.entries(sizes)) this.set({ template }, n)
      },
    })
    const usage = () => agent.usage()
    new Gauge({
      name: 'forkbox_sandbox_cpu_seconds_total',
      help: 'CPU time used by each running sandbox',
      labelNames: ['sandbox'],
      registers,
      async collect() {
        const all = await usage()
        this.reset()
        for (const u of all) this.set({ sandbox: u.id }, u.cpuSeconds)
      },
    })
    new Gauge({
      name: 'forkbox_sandbox_memory_bytes',
      help: 'Memory in use by each running sandbox (its cgroup, gVisor included)',
      labelNames: ['sandbox'],
      registers,
      async collect() {
        const all = await usage()
        this.reset()
        for (const u of all) this.set({ sandbox: u.id }, u.memoryBytes)
      },
    })
    for (const [dir, key] of [
      ['rx', 'networkRxBytes'],
      ['tx', 'networkTxBytes'],
    ] as const)
      new Gauge({
        name: `forkbox_sandbox_network_${dir}_bytes_total`,
        help: `Bytes each running sandbox ${dir === 'rx' ? 'received' : 'sent'} on its network interface`,
        labelNames: ['sandbox'],
        registers,
        async collect() {
          const all = await usage()
          this.reset()
          for (const u of all) this.set({ sandbox: u.id }, u[key])
        },
      })
    new Gauge({
      name: 'forkbox_sandbox_info',
      help: "Where each running sandbox lives on its host: its runsc container (and bundle dir) and cgroup (a claimed pool sandbox keeps the pool's names)",
      labelNames: ['sandbox', 'container', 'cgroup'],
      registers,
      async collect() {
        const all = await usage()
        this.reset()
        for (const u of all) this.set({ sandbox: u.id, container: u.container ?? '', cgroup: u.cgroup ?? '' }, 1)
      },
    })
    new Gauge({
      name: 'forkbox_sandboxes_frozen',
      help: 'Running sandboxes frozen while idle (no CPU until a call thaws them)',
      registers,
      async collect() {
        this.set((await usage()).filter((u) => u.frozen).length)
      },
    })
    this.sampleFrom = usage
  }

  private readonly sampleFrom: () => Promise<SandboxUsage[]>

  /** Adds one sample per running sandbox; forgets sandboxes that are gone. Returns what it read. */
  async sample(): Promise<SandboxUsage[]> {
    const usage = await this.sampleFrom()
    const at = new Date().toISOString()
    const seen = new Set<string>()
    for (const u of usage) {
      seen.add(u.id)
      let ring = this.samples.get(u.id)
      if (!ring) {
        ring = []
        this.samples.set(u.id, ring)
      }
      ring.push({
        at,
        cpuSeconds: u.cpuSeconds,
        memoryBytes: u.memoryBytes,
        networkRxBytes: u.networkRxBytes,
        networkTxBytes: u.networkTxBytes,
      })
      if (ring.length > SAMPLES) ring.shift()
    }
    for (const id of this.samples.keys()) if (!seen.has(id)) this.samples.delete(id)
    return usage
  }

  samplesOf(id: string): UsageSample[] {
    return this.samples.get(id) ?? []
  }
}
