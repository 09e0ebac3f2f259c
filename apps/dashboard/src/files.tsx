// The sandbox's files: a directory at a time (folders first), open a folder, view a text file or
// an image, download, rename, delete, make a folder, and upload by drag-and-drop (or a picker)
// with a progress bar per file. Uploads and downloads go through signed URLs the SDK asks for.
import type { FileEntry, Sandbox } from '@forkbox/sdk'
import { useCallback, useEffect, useState } from 'preact/hooks'
import { ErrorLine } from './live.tsx'
import { ScrollRegion } from './scroll.tsx'
import { describeError } from './session.ts'

const IMAGE = /\.(png|jpe?g|gif|webp|svg)$/i
const MAX_VIEW_BYTES = 1024 * 1024

function parentOf(path: string): string {
  const up = path.replace(/\/[^/]*\/?$/, '')
  return up === '' ? '/' : up
}

function join(dir: string, name: string): string {
  return `${dir.replace(/\/$/, '')}/${name}`
}

function size(bytes: number): string {
  return bytes < 1024
    ? `${bytes} B`
    : bytes < 1024 ** 2
      ? `${(bytes / 1024).toFixed(1)} KiB`
      : `${(bytes / 1024 ** 2).toFixed(1)} MiB`
}

/** PUTs `file` to a signed upload URL, reporting progress (fetch cannot report an upload's). */
function upload(url: string, file: File, onProgress: (fraction: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest()
    xhr.open('PUT', url)
    xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total)
    xhr.onload = () => (xhr.status < 300 ? resolve() : reject(new Error(`upload failed: HTTP ${xhr.status}`)))
    xhr.onerror = () => reject(new Error('upload failed: the connection broke'))
    xhr.send(file)
  })
}

type Viewing = { path: string; text?: string; image?: string } | null

export function FileBrowser({ sandbox, start = '/work' }: { sandbox: Sandbox; start?: string }) {
  const [dir, setDir] = useState(start)
  const [entries, setEntries] = useState<FileEntry[] | null>(null)
  const [error, setError] = useState('')
  const [viewing, setViewing] = useState<Viewing>(null)
  const [uploads, setUploads] = useState<Record<string, number>>({})
  const [folder, setFolder] = useState('')
  const [dragging, setDragging] = useState(false)

  const load = useCallback(async () => {
    try {
      const list = await sandbox.files.list(dir)
      list.sort((a, b) =>
        (a.type === 'dir') !== (b.type === 'dir') ? (a.type === 'dir' ? -1 : 1) : a.name.localeCompare(b.name),
      )
      setEntries(list)
      setError('')
    } catch (err) {
      setError(describeError(err))
    }
  }, [sandbox, dir])
  useEffect(() => {
    void load()
  }, [load])

  const act = async (call: () => Promise<unknown>) => {
    try {
      await call()
      await load()
    } catch (err) {
      setError(describeError(err))
    }
  }

  const send = async (files: FileList | null) => {
    for (const file of Array.from(files ?? [])) {
      const path = join(dir, file.name)
      setUploads((u) => ({ ...u, [file.name]: 0 }))
      try {
        await upload(await sandbox.files.uploadUrl(path), file, (f) => setUploads((u) => ({ ...u, [file.name]: f })))
      } catch (err) {
        setError(`${file.name}: ${describeError(err)}`)
      }
      setUploads(({ [file.name]: _done, ...rest }) => rest)
    }
    await load()
  }

  const view = async (entry: FileEntry) => {
    try {
      if (IMAGE.test(entry.name)) {
        const bytes = await sandbox.files.read(entry.path, { format: 'bytes' })
        const type = entry.name.endsWith('.svg') ? 'image/svg+xml' : `image/${entry.name.split('.').pop()}`
        setViewing({
          path: entry.path,
          image: URL.createObjectURL(new Blob([bytes as Uint8Array<ArrayBuffer>], { type })),
        })
      } else if (entry.size <= MAX_VIEW_BYTES) {
        setViewing({ path: entry.path, text: await sandbox.files.read(entry.path) })
      } else setError(`${entry.name} is larger than 1 MiB: download it instead`)
    } catch (err) {
      setError(describeError(err))
    }
  }

  const download = async (entry: FileEntry) => {
    try {
      const a = document.createElement('a')
      a.href = await sandbox.files.downloadUrl(entry.path)
      a.download = entry.name
      a.click()
    } catch (err) {
      setError(describeError(err))
    }
  }

  return (
    <section aria-label="files">
      <h2>
        Files <small>{dir}</small>
      </h2>
      <div class="cell-actions">
        <button type="button" class="quiet" disabled={dir === '/'} onClick={() => setDir(parentOf(dir))}>
          Up
        </button>
        <form
          class="inline"
          onSubmit={(e) => {
            e.preventDefault()
            if (folder.trim()) void act(() => sandbox.files.makeDir(join(dir, folder.trim()))).then(() => setFolder(''))
          }}
        >
          <input
            aria-label="new folder name"
            placeholder="new folder"
            value={folder}
            onInput={(e) => setFolder(e.currentTarget.value)}
          />
          <button type="submit" class="quiet" disabled={!folder.trim()}>
            Create folder
          </button>
        </form>
      </div>
      {/* biome-ignore lint/a11y/noStaticElementInteractions: dropping is a mouse shortcut; the file input inside is the keyboard way */}
      <div
        class={`dropzone${dragging ? ' over' : ''}`}
        onDragOver={(e) => {
          e.preventDefault()
          setDragging(true)
        }}
        onDragLeave={() => setDragging(false)}
        onDrop={(e) => {
          e.preventDefault()
          setDragging(false)
          void send(e.dataTransfer?.files ?? null)
        }}
      >
        <label>
          Drop files here, or{' '}
          <input type="file" multiple aria-label="upload files" onChange={(e) => void send(e.currentTarget.files)} />
        </label>
        {Object.entries(uploads).map(([name, f]) => (
          <div key={name} class="upload">
            {name} <progress value={f} max={1} aria-label={`uploading ${name}`} />
          </div>
        ))}
      </div>
      <ErrorLine error={error} />
      {entries && (
        <ul class="files" aria-label={`contents of ${dir}`}>
          {entries.map((e) => (
            <li key={e.path} data-file={e.name}>
              {e.type === 'dir' ? (
                <button type="button" class="link" onClick={() => setDir(e.path)}>
                  {e.name}/
                </button>
              ) : (
                <button type="button" class="link" onClick={() => void view(e)}>
                  {e.name}
                </button>
              )}
              <span class="muted">{e.type === 'dir' ? '' : size(e.size)}</span>
              <span class="file-actions">
                {e.type === 'file' && (
                  <button
                    type="button"
                    class="quiet"
                    onClick={() => void download(e)}
                    aria-label={`download ${e.name}`}
                  >
                    Download
                  </button>
                )}
                <button
                  type="button"
                  class="quiet"
                  aria-label={`rename ${e.name}`}
                  onClick={() => {
                    const name = prompt(`Rename ${e.name} to`, e.name)
                    if (name && name !== e.name) void act(() => sandbox.files.rename(e.path, join(dir, name)))
                  }}
                >
                  Rename
                </button>
                <button
                  type="button"
                  class="danger"
                  aria-label={`delete ${e.name}`}
                  onClick={() => {
                    if (confirm(`Delete ${e.path}?`)) void act(() => sandbox.files.remove(e.path))
                  }}
                >
                  Delete
                </button>
              </span>
            </li>
          ))}
          {entries.length === 0 && <li class="muted">(empty)</li>}
        </ul>
      )}
      {viewing && (
        <figure class="viewer">
          <figcaption>
            {viewing.path}{' '}
            <button type="button" class="quiet" onClick={() => setViewing(null)}>
              Close
            </button>
          </figcaption>
          {viewing.image ? (
            <img src={viewing.image} alt={viewing.path} />
          ) : (
            <ScrollRegion class="scroll-output" label={`text of ${viewing.path}`}>
              <pre>{viewing.text}</pre>
            </ScrollRegion>
          )}
        </figure>
      )}
    </section>
  )
}
