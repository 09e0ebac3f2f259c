// An agent on the OpenAI Agents SDK with a sandbox per run: runWithSandbox adds forkbox's tools
// (run_code, run_command, read_file, write_file) and kills the sandbox when the run ends.
//   npm install @openai/agents @forkbox/ai @forkbox/sdk
//   OPENAI_API_KEY=... FORKBOX_API_KEY=... node --import tsx examples/ai-openai-agents.ts
import { runWithSandbox } from '@forkbox/ai/openai-agents'
import { Agent } from '@openai/agents'

const analyst = new Agent({
  name: 'analyst',
  instructions: 'Answer by running code in the sandbox; check your results before you answer.',
  model: 'gpt-4.1',
})
const { result, sandboxId } = await runWithSandbox(analyst, 'What is the 1000th prime? Show the code you ran.')
console.log(`sandbox ${sandboxId} (killed)\n${result.finalOutput}`)
