// The cost of starting a process in a sandbox, as a user sees it: exec round trips through the
// whole stack and terminal opens, next to the raw spawn cost inside gVisor. Not a test.
//   node --import tsx bench/exec.ts [--iterations N]
import { Sandbox } from '@forkbox/sdk'
import { benchHost, measure, N, printSummary, report } from './lib.ts'

const host = await benchHost('exec', 1)
try {
  const sbx = await Sandbox.create({ ...host.conn })
  report('exec ["true"] via SDK (whole stack)', await measure(N, () => sbx.exec(['true'])))
  report('exec "true" via SDK (bash -c)', await measure(N, () => sbx.exec('true')))
  report('exec ["true"] as root via SDK', await measure(N, () => sbx.exec(['true'], { user: 'root' })))
  // what a user process pays to start another one (the guest is not involved)
  const probe = `
import os, time, json
xs = []
for i in range(${N} + 3):
    t = time.perf_counter(); pid = os.posix_spawn('/bin/true', ['/bin/true'], {}); os.waitpid(pid, 0)
    xs.append((time.perf_counter() - t) * 1000)
print(json.dumps(xs[3:]))`
  const raw = await sbx.exec(['python3', '-c', probe], { timeoutSeconds: 120 })
  report('baseline: spawn /bin/true inside gVisor (raw)', JSON.parse(raw.stdout) as number[])
  await sbx.kill()
} finally {
  await host.close()
}
printSummary()
