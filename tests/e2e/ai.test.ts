// The agent-framework integrations (@forkbox/ai), each driven
// by its framework's own test double for a model, against real sandboxes: the scripted model asks
// for a chart, then for a cell that fails, then answers. The chart must come back to the model as
// an image, the failure as an error it can read, and the sandbox must be gone when the run ends.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { sandboxTools as langchainTools } from '@forkbox/ai/langchain'
import { runWithSandbox } from '@forkbox/ai/openai-agents'
import { sandboxTools as vercelTools } from '@forkbox/ai/vercel'
import { Sandbox } from '@forkbox/sdk'
import { BaseChatModel } from '@langchain/core/language_models/chat_models'
import { AIMessage, type BaseMessage, HumanMessage, ToolMessage } from '@langchain/core/messages'
import type { ChatResult } from '@langchain/core/outputs'
import { Agent, type Model, type ModelRequest, type ModelResponse, setTracingDisabled, Usage } from '@openai/agents'
import { generateText, stepCountIs } from 'ai'
import { MockLanguageModelV3 } from 'ai/test'
import { useTestHost } from './harness.ts'

const host = useTestHost()

const PLOT = 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title("squares")\nplt.show()'
const FAIL = 'print("before")\n1 / 0'
const PNG_BASE64 = 'iVBORw0KGgo' // a PNG's first 8 bytes, in base64

/**
 * A LangChain chat model that answers from a script, one message per call (LangChain's own fakes
 * answer every call alike, so they cannot ask for a tool and then answer).
 */
class ScriptedChatModel extends BaseChatModel {
  readonly #script: AIMessage[]
  constructor(script: AIMessage[]) {
    super({})
    this.#script = [...script]
  }
  _llmType(): string {
    return 'scripted'
  }
  async _generate(): Promise<ChatResult> {
    const message = this.#script.shift()
    if (!message) throw new Error('the script ran out')
    return { generations: [{ text: typeof message.content === 'string' ? message.content : '', message }] }
  }
}

/** The sandbox `id` was killed: its record says so. */
async function assertKilled(id: string | undefined): Promise<void> {
  assert.ok(id, 'a sandbox was made')
  const info = await (await Sandbox.connect(id, host().conn)).getInfo()
  assert.equal(info.state, 'killed')
}

describe('agent-framework tools', () => {
  it('Vercel AI SDK: MockLanguageModelV3 gets the chart as an image part and the failure as error text', async () => {
    const usage = {
      inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
      outputTokens: { total: 1, text: 1, reasoning: 0 },
    }
    const call = (id: string, code: string) => ({
      content: [{ type: 'tool-call' as const, toolCallId: id, toolName: 'run_code', input: JSON.stringify({ code }) }],
      finishReason: { unified: 'tool-calls' as const, raw: undefined },
      usage,
      warnings: [],
    })
    const model = new MockLanguageModelV3({
      doGenerate: [
        call('c1', PLOT),
        call('c2', FAIL),
        {
          content: [{ type: 'text', text: 'done' }],
          finishReason: { unified: 'stop', raw: undefined },
          usage,
          warnings: [],
        },
      ],
    })
    const box = vercelTools({ create: { ...host().conn, metadata: { test: 'vercel' } } })
    try {
      const result = await generateText({ model, tools: box.tools, stopWhen: stepCountIs(5), prompt: 'plot squares' })
      assert.equal(result.text, 'done')
    } finally {
      await box.close()
    }
    // what the model was sent back after each tool call
    const toolResult = (i: number) => {
      const prompt = model.doGenerateCalls[i]?.prompt ?? []
      const last = prompt.at(-1)
      assert.ok(last?.role === 'tool', `the last message is ${last?.role}`)
      const part = (last.content as { type: string; output: { type: string; value: unknown } }[])[0]
      return part?.output
    }
    const chart = toolResult(1) as { type: string; value: { type: string; data?: string; mediaType?: string }[] }
    assert.equal(chart.type, 'content')
    const image = chart.value.find((v) => v.type === 'image-data')
    assert.equal(image?.mediaType, 'image/png')
    assert.ok(image?.data?.startsWith(PNG_BASE64))
    const failure = toolResult(2) as { type: string; value: string }
    assert.equal(failure.type, 'error-text')
    assert.match(failure.value, /before/)
    assert.match(failure.value, /ZeroDivisionError: division by zero/)
    await assertKilled(await box.session.sandboxId())
  })

  it('OpenAI Agents SDK: a scripted Model gets an input_image and the traceback; runWithSandbox kills the sandbox', async () => {
    setTracingDisabled(true)
    const requests: ModelRequest[] = []
    const call = (callId: string, code: string): ModelResponse => ({
      usage: new Usage(),
      output: [
        {
          type: 'function_call',
          callId,
          name: 'run_code',
          status: 'completed',
          arguments: JSON.stringify({ code, language: null }),
        },
      ],
    })
    const script: ModelResponse[] = [
      call('c1', PLOT),
      call('c2', FAIL),
      {
        usage: new Usage(),
        output: [
          {
            type: 'message',
            role: 'assistant',
            status: 'completed',
            content: [{ type: 'output_text', text: 'done' }],
          },
        ],
      },
    ]
    const model: Model = {
      async getResponse(request) {
        requests.push(request)
        const next = script.shift()
        if (!next) throw new Error('the script ran out')
        return next
      },
      // biome-ignore lint/correctness/useYield: the scripted model does not stream
      async *getStreamedResponse() {
        throw new Error('not streamed')
      },
    }
    const agent = new Agent({ name: 'analyst', instructions: 'Use the sandbox.', model })
    const { result, sandboxId } = await runWithSandbox(agent, 'plot squares', {
      create: { ...host().conn, metadata: { test: 'openai-agents' } },
    })
    assert.equal(result.finalOutput, 'done')
    const input = (i: number) => JSON.stringify(requests[i]?.input)
    assert.match(input(1), new RegExp(`data:image/png;base64,${PNG_BASE64}`))
    assert.match(input(2), /ZeroDivisionError: division by zero/)
    await assertKilled(sandboxId)
  })

  it('LangChain.js: a scripted BaseChatModel gets an image block and an error ToolMessage', async () => {
    const model = new ScriptedChatModel([
      new AIMessage({
        content: '',
        tool_calls: [{ type: 'tool_call', id: 'c1', name: 'run_code', args: { code: PLOT } }],
      }),
      new AIMessage({
        content: '',
        tool_calls: [{ type: 'tool_call', id: 'c2', name: 'run_code', args: { code: FAIL } }],
      }),
      new AIMessage('done'),
    ])
    const box = langchainTools({ create: { ...host().conn, metadata: { test: 'langchain' } } })
    const messages: BaseMessage[] = [new HumanMessage('plot squares')]
    try {
      // the agent loop: the model's tool calls run, their ToolMessages go back to it
      for (let turn = 0; turn < 5; turn++) {
        const reply = (await model.invoke(messages)) as AIMessage
        messages.push(reply)
        if (!reply.tool_calls?.length) break
        for (const call of reply.tool_calls) {
          const t = box.tools.find((x) => x.name === call.name)
          assert.ok(t, call.name)
          messages.push((await t.invoke(call)) as ToolMessage)
        }
      }
    } finally {
      await box.close()
    }
    assert.equal(messages.at(-1)?.content, 'done')
    const tools = messages.filter((m): m is ToolMessage => m instanceof ToolMessage)
    assert.equal(tools.length, 2)
    const [chart, failure] = tools
    assert.equal(chart?.status, 'success')
    const blocks = chart?.content as { type: string; data?: string; mimeType?: string }[]
    const image = blocks.find((b) => b.type === 'image')
    assert.equal(image?.mimeType, 'image/png')
    assert.ok(image?.data?.startsWith(PNG_BASE64))
    assert.equal(failure?.status, 'error')
    assert.match(String(failure?.content), /ZeroDivisionError: division by zero/)
    await assertKilled(await box.session.sandboxId())
  })
})
