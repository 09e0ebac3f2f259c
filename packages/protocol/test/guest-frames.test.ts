import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, it } from 'node:test'
import { z } from 'zod'
import {
  GuestCellResult,
  GuestChannelMessage,
  GuestConfigured,
  GuestDaemonMessage,
  GuestDetached,
  GuestEnded,
  GuestPing,
  GuestProcessStarted,
  GuestReadDone,
  GuestRequest,
  GuestSwept,
  GuestUsage,
  GuestWatchEnd,
} from '../src/guest.ts'
import { CodeContext, FileEntry, ProcessInfo } from '../src/schemas.ts'

const golden = JSON.parse(readFileSync(new URL('./fixtures/guest-frames.json', import.meta.url), 'utf8')) as {
  requests: Record<string, unknown>[]
  daemon: Record<string, unknown>[]
  channel: Record<string, unknown>[]
  results: Record<string, unknown[]>
}

type AnyObject = z.ZodObject<z.ZodRawShape>

/** The union member for `value` of `key`, strict: a field the schema does not know fails too. */
function member(union: { options: readonly AnyObject[] }, key: string, value: unknown): AnyObject {
  const found = union.options.find((o) => {
    const field = o.shape[key]
    return field instanceof z.ZodLiteral && field.values.has(value as never)
  })
  assert.ok(found, `no schema for ${key} ${String(value)}`)
  return found.strict()
}

function discriminants(union: { options: readonly AnyObject[] }, key: string): string[] {
  return union.options.flatMap((o) => [...(o.shape[key] as z.ZodLiteral<string>).values])
}

function check(schema: AnyObject, frame: unknown, what: string): void {
  const r = schema.strict().safeParse(frame)
  assert.ok(r.success, `${what} ${JSON.stringify(frame)}: ${r.success ? '' : z.prettifyError(r.error)}`)
}

describe('golden guest frames', () => {
  it('every request parses, and every op has one', () => {
    for (const f of golden.requests) check(member(GuestRequest, 'op', f.op), f, 'request')
    const seen = new Set(golden.requests.map((f) => f.op))
    assert.deepEqual(
      discriminants(GuestRequest, 'op').filter((op) => !seen.has(op)),
      [],
    )
  })

  it('every message parses, and every message type has one', () => {
    for (const f of golden.daemon) check(member(GuestDaemonMessage, 'type', f.type), f, 'daemon message')
    for (const f of golden.channel) check(member(GuestChannelMessage, 'type', f.type), f, 'channel message')
    const seen = new Set([...golden.daemon, ...golden.channel].map((f) => f.type))
    const all = [...discriminants(GuestDaemonMessage, 'type'), ...discriminants(GuestChannelMessage, 'type')]
    assert.deepEqual(
      all.filter((t) => !seen.has(t)),
      [],
    )
  })

  it('every result value parses against its schema, and every schema has one', () => {
    const schemas: Record<string, AnyObject> = {
      cell: GuestCellResult,
      processInfo: ProcessInfo,
      context: CodeContext,
      entry: FileEntry,
      processStarted: GuestProcessStarted,
      readDone: GuestReadDone,
      detached: GuestDetached,
      ping: GuestPing,
      usage: GuestUsage,
      configured: GuestConfigured,
      ended: GuestEnded,
      swept: GuestSwept,
      watchEnd: GuestWatchEnd,
    }
    assert.deepEqual(Object.keys(golden.results).sort(), Object.keys(schemas).sort())
    for (const [name, values] of Object.entries(golden.results)) {
      const schema = schemas[name]
      assert.ok(schema && values.length > 0, name)
      for (const v of values) check(schema, v, `${name} result`)
    }
  })
})
