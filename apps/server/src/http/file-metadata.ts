// User metadata of a file, sent with its upload as `X-Metadata-<key>: <value>` headers (E2B's
// envd 0.6.2 and forkbox's own PUT alike). Key case is kept where the raw headers are at hand
// (the Node server); elsewhere keys arrive lower-cased, as HTTP allows.
import { FileMetadata } from '@forkbox/protocol'
import type { Context } from 'hono'
import type { AppEnv } from './env.ts'
import { parseOrThrow } from './validate.ts'

const PREFIX = 'x-metadata-'

/** The upload's metadata, checked; undefined when it carries none. */
export function metadataOf(c: Context<AppEnv>): Record<string, string> | undefined {
  const raw = c.env?.incoming?.rawHeaders
  const pairs: [string, string][] = []
  if (raw) {
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const name = raw[i] as string
      if (name.toLowerCase().startsWith(PREFIX)) pairs.push([name.slice(PREFIX.length), raw[i + 1] as string])
    }
  } else {
    c.req.raw.headers.forEach((value, name) => {
      if (name.startsWith(PREFIX)) pairs.push([name.slice(PREFIX.length), value])
    })
  }
  if (pairs.length === 0) return undefined
  return parseOrThrow(FileMetadata, Object.fromEntries(pairs))
}
