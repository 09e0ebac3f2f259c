// A data-analysis agent on the Vercel AI SDK: the model writes Python, forkbox runs it in a
// sandbox made for this conversation, charts come back to the model as images.
//   npm install ai @ai-sdk/openai @forkbox/ai @forkbox/sdk
//   OPENAI_API_KEY=... FORKBOX_API_KEY=... node --import tsx examples/ai-vercel.ts
import { openai } from '@ai-sdk/openai'
import { sandboxTools } from '@forkbox/ai/vercel'
import { generateText, stepCountIs } from 'ai'

await using box = sandboxTools() // the sandbox is made on the first tool call, killed at the end
const { text, steps } = await generateText({
  model: openai('gpt-4.1'),
  tools: box.tools,
  stopWhen: stepCountIs(10),
  prompt: 'Simulate 1,000 rolls of two dice, plot the distribution of their sum, and describe it.',
})
console.log(`${steps.length} steps\n${text}`)
