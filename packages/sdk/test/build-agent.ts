// The files agent that also "builds" templates the way tests need to see: it writes a build's
// context listing to its log, can write many lines slowly, and fails images named `missing/...`.

import { createReadStream } from 'node:fs'
import { AppError, type BuildLogLine, type TemplateBuildResult, type TemplateBuildSpec } from '@forkbox/protocol'
import { extract } from 'tar-stream'
import { FilesAgent } from './files-agent.ts'

/** `name` for a directory (`name/`), `name -> target` for a link, `name (N bytes)` for a file. */
export async function listTar(tar: AsyncIterable<Uint8Array>): Promise<string[]> {
  const out: string[] = []
  const ex = extract()
  const reading = (async () => {
    for await (const entry of ex) {
      const h = entry.header
      let size = 0
      for await (const chunk of entry) size += (chunk as Uint8Array).length
      if (h.type === 'directory') out.push(h.name.endsWith('/') ? h.name : `${h.name}/`)
      else if (h.type === 'symlink') out.push(`${h.name} -> ${h.linkname}`)
      else out.push(`${h.name} (${size} bytes)`)
    }
  })()
  for await (const chunk of tar) ex.write(chunk)
  ex.end(undefined)
  await reading
  return out
}

export class BuildAgent extends FilesAgent {
  /** Lines each build writes before it finishes, a millisecond apart (a live log to follow). */
  stepLines = 0

  override async buildTemplate(
    spec: TemplateBuildSpec,
    onLog: (line: BuildLogLine) => void,
  ): Promise<TemplateBuildResult> {
    if (spec.source.kind === 'image' && spec.source.image.startsWith('missing/'))
      this.buildError = new AppError('IMAGE_NOT_FOUND', `image ${spec.source.image} not found in its registry`)
    if (spec.source.kind === 'dockerfile' && spec.source.contextTar) {
      const entries = await listTar(createReadStream(spec.source.contextTar))
      onLog({ stream: 'system', message: `context: ${entries.join(', ')}` })
    }
    for (let i = 0; i < this.stepLines; i++) {
      onLog({ step: 1 + Math.floor(i / 10), stream: 'stdout', message: `line ${i}` })
      await new Promise((r) => setTimeout(r, 1))
    }
    return super.buildTemplate(spec, onLog)
  }
}
