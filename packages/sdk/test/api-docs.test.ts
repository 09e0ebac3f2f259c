// The generated API reference (typedoc for TypeScript, pydoc for Python: scripts/api-docs.mjs)
// builds from the code, and no link in it or in the repository's Markdown docs is broken.
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'
// @ts-expect-error a plain ESM script of the repo, without types
import { brokenHtmlLinks, brokenMarkdownLinks, buildApiDocs } from '../../../scripts/api-docs.mjs'

const out = mkdtempSync(join(tmpdir(), 'fbx-api-docs-'))
after(() => rmSync(out, { recursive: true, force: true }))

describe('API docs', () => {
  it('build from the code of both SDKs with no broken link, nor any in the Markdown docs', () => {
    assert.deepEqual(buildApiDocs(out), [])
    for (const page of [
      'ts/index.html',
      'ts/classes/_forkbox_sdk.Sandbox.html',
      'python/forkbox.html',
      'python/forkbox.sandbox.html',
    ])
      assert.ok(existsSync(join(out, page)), page)
  })

  it('the link check finds a missing page, a missing anchor and a missing Markdown target', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fbx-links-'))
    try {
      writeFileSync(
        join(dir, 'a.html'),
        '<a href="b.html#there">b</a> <a href="gone.html">x</a> <a href="https://x.test/">ok</a>',
      )
      writeFileSync(join(dir, 'b.html'), '<h2 id="here">b</h2>')
      assert.deepEqual(brokenHtmlLinks(dir).sort(), ['a.html -> b.html#there (no such anchor)', 'a.html -> gone.html'])
      writeFileSync(join(dir, 'doc.md'), '[fine](b.html) [gone](nope.md) `[code](x.md)`\n```\n[fenced](y.md)\n```\n')
      const broken = brokenMarkdownLinks([join(dir, 'doc.md')]) as string[]
      assert.equal(broken.length, 1)
      assert.match(broken[0] ?? '', /doc\.md -> nope\.md$/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
