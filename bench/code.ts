// Code interpreter figures through the whole stack (SDK → HTTP → agent → guest → kernel), next to
// baselines from the same run: the kernel's own time for the cell, and an exec of `true`.
//   node --import tsx bench/code.ts [--iterations N]
import { Sandbox } from '@forkbox/sdk'
import { benchHost, measure, N, printSummary, report, timed } from './lib.ts'

const CHART = `fig, ax = plt.subplots(figsize=(8, 4))
ax.bar([f"m{i}" for i in range(12)], np.arange(12) ** 1.5)
ax.set_title("sales")
plt.show()`

const host = await benchHost('code', 1)
try {
  const sbx = await Sandbox.create({ ...host.conn, template: 'code-interpreter', ttlSeconds: 3600 })
  report('baseline: exec ["true"] via SDK', await measure(N, () => sbx.exec(['true'])))
  const inKernel: number[] = []
  report(
    "runCode('1+1') via SDK (whole stack)",
    await measure(N, async () => {
      const e = await sbx.runCode('1+1')
      inKernel.push(e.durationMs)
    }),
  )
  report("baseline: runCode('1+1') inside the guest (kernel time)", inKernel.slice(3))
  report(
    'runCode: 12-bar chart → PNG via SDK',
    await measure(Math.min(N, 20), async () => {
      const e = await sbx.runCode(CHART)
      if (!e.results[0]?.png) throw new Error('no PNG')
    }),
  )
  report(
    'runCode: pandas describe() of 10k rows via SDK',
    await measure(Math.min(N, 20), () =>
      sbx.runCode('pd.DataFrame({"a": np.arange(10_000), "b": np.arange(10_000) % 7}).describe()'),
    ),
  )
  // A new context: forked warm from the zygote, next to one started cold (env Python reads at
  // start, like PYTHONPATH, cannot be forked in) in the same sandbox
  const newContext = (envs?: Record<string, string>) => async () => {
    const c = await sbx.createCodeContext(envs ? { envs } : {})
    await sbx.runCode('1+1', { context: c })
    await sbx.contexts.remove(c)
  }
  report("new context → first cell '1+1' (forked warm)", await measure(Math.min(N, 20), newContext()))
  report(
    "baseline: new context → first cell '1+1', started cold",
    await measure(Math.min(N, 3), newContext({ PYTHONPATH: '/nonexistent' }), 0),
  )
  report(
    "context restart → first cell '1+1'",
    await measure(Math.min(N, 20), async () => {
      await sbx.contexts.restart('python')
      await sbx.runCode('1+1')
    }),
  )
  await sbx.kill()

  // The first cell of a new sandbox (pool hit): it finds pandas, numpy and matplotlib imported.
  const firstCell = (code: string) => async () => {
    const s = await Sandbox.create({ ...host.conn, template: 'code-interpreter' })
    const t0 = performance.now()
    await s.runCode(code)
    const ms = performance.now() - t0
    await s.kill()
    return ms
  }
  const createToFirst = async () => {
    const t0 = performance.now()
    const s = await Sandbox.create({ ...host.conn, template: 'code-interpreter' })
    await s.runCode('1+1')
    const ms = performance.now() - t0
    await s.kill()
    return ms
  }
  const runs = Math.min(N, 8)
  // pauses let the pool restore the next sandbox (and the last kill finish) first
  report("first cell after create: '1+1'", await timed(runs, firstCell('1+1'), 4000))
  report(
    "first cell after create: 'df.describe()'",
    await timed(runs, firstCell('pd.DataFrame({"a": [1, 2, 3]}).describe()'), 4000),
  )
  report("create → first runCode('1+1') result (pool hit)", await timed(runs, createToFirst, 4000))
} finally {
  await host.close()
}
printSummary()
