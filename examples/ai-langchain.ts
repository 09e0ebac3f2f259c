// LangChain.js: forkbox's tools bound to a chat model, in the smallest agent loop. With LangGraph,
// pass `box.tools` to its ToolNode / createReactAgent instead.
//   npm install @langchain/core @langchain/openai @forkbox/ai @forkbox/sdk
//   OPENAI_API_KEY=... FORKBOX_API_KEY=... node --import tsx examples/ai-langchain.ts
import { sandboxTools } from '@forkbox/ai/langchain'
import { type BaseMessage, HumanMessage, type ToolMessage } from '@langchain/core/messages'
import { ChatOpenAI } from '@langchain/openai'

await using box = sandboxTools()
const model = new ChatOpenAI({ model: 'gpt-4.1' }).bindTools(box.tools)
const messages: BaseMessage[] = [new HumanMessage('Fit a line to y = 2x + noise for 50 points and plot it.')]
for (let turn = 0; turn < 10; turn++) {
  const reply = await model.invoke(messages)
  messages.push(reply)
  if (!reply.tool_calls?.length) break
  for (const call of reply.tool_calls) {
    const tool = box.tools.find((t) => t.name === call.name)
    if (tool) messages.push((await tool.invoke(call)) as ToolMessage)
  }
}
console.log(messages.at(-1)?.content)
