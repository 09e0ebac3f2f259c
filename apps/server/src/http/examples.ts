// Examples for the API reference (/docs, /openapi.json) of the calls people make first. Each is
// checked against its schema by the compiler (`satisfies`), so an example cannot drift from the
// API it shows; other routes show the example values Swagger UI derives from their schemas.
import type {
  CreateSandboxRequest,
  ExecRequest,
  ExecResult,
  Execution,
  ForkRequest,
  RunCodeRequest,
  Sandbox,
} from '@forkbox/protocol'

export const createSandboxExample = {
  template: 'code-interpreter',
  ttlSeconds: 600,
  metadata: { user: 'u_123', session: 'chat-42' },
  resources: { vcpus: 2, memoryMB: 2048 },
  network: { internet: false },
} satisfies CreateSandboxRequest

export const sandboxExample = {
  id: 'sbx-8c1f0e6a2b9d4c7e5f10',
  template: 'code-interpreter',
  state: 'running',
  metadata: { user: 'u_123', session: 'chat-42' },
  resources: { vcpus: 2, memoryMB: 2048, diskMB: 1024, pids: 1024 },
  createdAt: '2026-12-05T10:00:00.000Z',
  expiresAt: '2026-12-05T10:10:00.000Z',
  endedAt: null,
  errorReason: null,
  errorMessage: null,
  persistent: false,
  network: { internet: false, allowOut: [], denyOut: [], ports: [] },
  onTimeout: 'kill',
  freeze: true,
  accessToken: 'fbxt_3b5d7f9a1c2e4f6a8b0d',
  domain: 'localhost',
} satisfies Sandbox

export const execExample = {
  cmd: 'python3 -c "import sys; print(sys.version)"',
  cwd: '/work',
  timeoutSeconds: 30,
} satisfies ExecRequest

export const execResultExample = {
  exitCode: 0,
  signal: null,
  stdout: '3.11.2 (main, Apr 28 2025, 14:11:48) [GCC 12.2.0]\n',
  stderr: '',
  encoding: 'utf8',
  timedOut: false,
  truncated: false,
  durationMs: 41.7,
} satisfies ExecResult

export const runCodeExample = {
  code: 'import pandas as pd\ndf = pd.DataFrame({"x": [1, 2, 3]})\nprint(len(df))\ndf.x.sum()',
  language: 'python',
} satisfies RunCodeRequest

export const executionExample = {
  results: [{ isMainResult: true, text: '6' }],
  logs: { stdout: ['3\n'], stderr: [] },
  error: null,
  executionCount: 1,
  timedOut: false,
  truncated: false,
  durationMs: 12.4,
} satisfies Execution

export const forkExample = { count: 2, metadata: { branch: 'try-b' } } satisfies ForkRequest
