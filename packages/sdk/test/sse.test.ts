// The event-stream reader on what a server or a proxy in between may send: CRLF or CR line ends,
// `id:` fields, comments, data split over lines, chunks cut anywhere.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { type ServerSentEvent, serverSentEvents } from '../src/sse.ts'

function streamOf(...chunks: string[]): Response {
  const bytes = chunks.map((c) => new TextEncoder().encode(c))
  return new Response(
    new ReadableStream({
      pull(controller) {
        const next = bytes.shift()
        if (next) controller.enqueue(next)
        else controller.close()
      },
    }),
    { headers: { 'content-type': 'text/event-stream' } },
  )
}

async function all(res: Response): Promise<ServerSentEvent[]> {
  const out: ServerSentEvent[] = []
  for await (const e of serverSentEvents(res)) out.push(e)
  return out
}

describe('serverSentEvents', () => {
  it('reads CRLF and CR line ends, ids, comments and multi-line data', async () => {
    const events = await all(
      streamOf(
        ': keep-alive\r\n',
        'event: stdout\r\nid: 1\r\ndata: {"data":\r\ndata:  "a\u00e9"}\r\n\r\n',
        'event: stderr\rid: 2\rdata: {"data":"b"}\r\r',
        'id: 3\ndata: {"n":3}\n\n',
      ),
    )
    assert.deepEqual(events, [
      { event: 'stdout', id: '1', payload: { data: 'aé' } },
      { event: 'stderr', id: '2', payload: { data: 'b' } },
      { event: 'message', id: '3', payload: { n: 3 } },
    ])
  })

  it('joins an event cut across chunks, even inside a UTF-8 character', async () => {
    const body = new TextEncoder().encode('event: exit\r\ndata: {"t":"é"}\r\n\r\n')
    const cut = body.indexOf(0xc3) + 1
    const res = new Response(
      new ReadableStream({
        start(controller) {
          controller.enqueue(body.subarray(0, cut))
          controller.enqueue(body.subarray(cut))
          controller.close()
        },
      }),
    )
    assert.deepEqual(await all(res), [{ event: 'exit', id: undefined, payload: { t: 'é' } }])
  })

  it('cancels the response when the reader stops early', async () => {
    let cancelled = false
    const res = new Response(
      new ReadableStream({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('data: 1\n\ndata: 2\n\n'))
        },
        cancel() {
          cancelled = true
        },
      }),
    )
    for await (const e of serverSentEvents(res)) {
      assert.equal(e.payload, 1)
      break
    }
    assert.ok(cancelled)
  })

  it('ends with the abort reason when the signal aborts a body that never closes', async () => {
    const res = new Response(
      new ReadableStream({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('data: 1\n\n'))
        },
      }),
    )
    const ctl = new AbortController()
    const seen: unknown[] = []
    const reading = (async () => {
      for await (const e of serverSentEvents(res, ctl.signal)) {
        seen.push(e.payload)
        ctl.abort(new Error('stop'))
      }
    })()
    await assert.rejects(reading, /stop/)
    assert.deepEqual(seen, [1])
  })
})
