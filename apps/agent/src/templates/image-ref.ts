// Image references (`registry/repo:tag@sha256:…`) parsed strictly, and which registries may be plain HTTP.
import { AppError } from '@forkbox/protocol'

export interface ImageReference {
  /** `host[:port]`; `docker.io` when the reference names none, as Docker reads it. */
  registry: string
  /** Path in the registry; Docker Hub's one-word names get `library/`. */
  repository: string
  tag: string | null
  digest: string | null
}

// The grammar of github.com/distribution/reference, without IPv6 hosts.
const DOMAIN_PART = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])'
const DOMAIN = `${DOMAIN_PART}(?:\\.${DOMAIN_PART})*(?::[0-9]{1,5})?`
const PATH_PART = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*'
const REFERENCE = new RegExp(
  `^(?:(${DOMAIN})/)?(${PATH_PART}(?:/${PATH_PART})*)(?::([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(?:@(sha256:[a-f0-9]{64}))?$`,
)
const MAX_NAME_LENGTH = 255

function invalid(ref: string, why: string): AppError {
  return new AppError('VALIDATION_FAILED', `invalid image reference ${JSON.stringify(ref)}: ${why}`, {
    image: ref,
  })
}

export function parseImageReference(ref: string): ImageReference {
  // a reference is passed to skopeo as an argument: nothing that could read as an option
  if (ref.startsWith('-')) throw invalid(ref, 'must not start with "-"')
  if (ref.length > 512) throw invalid(ref, 'too long')
  const m = REFERENCE.exec(ref)
  if (!m) throw invalid(ref, 'expected [registry/]name[:tag][@sha256:digest]')
  const [, first, path = '', tag, digest] = m
  // Docker's rule: the first part is a registry only if it looks like a host (a dot, a port, or localhost)
  let registry = 'docker.io'
  let repository = path
  if (first !== undefined) {
    if (first.includes('.') || first.includes(':') || first === 'localhost') registry = first
    else repository = `${first}/${path}`
  }
  if (registry !== first && first !== undefined && first !== first.toLowerCase())
    throw invalid(ref, 'repository names are lower case')
  if (registry === 'docker.io' && !repository.includes('/')) repository = `library/${repository}`
  if (`${registry}/${repository}`.length > MAX_NAME_LENGTH) throw invalid(ref, 'name too long')
  const port = /:(\d+)$/.exec(registry)?.[1]
  if (port !== undefined && Number(port) > 65535) throw invalid(ref, 'port out of range')
  return { registry, repository, tag: tag ?? (digest ? null : 'latest'), digest: digest ?? null }
}

/** `registry/repository` with the digest if pinned, else the tag: what skopeo reads after `docker://`. */
export function formatImageReference(r: ImageReference, digest = r.digest): string {
  const name = `${r.registry}/${r.repository}`
  return digest ? `${name}@${digest}` : `${name}:${r.tag ?? 'latest'}`
}

/**
 * Docker's rule: a registry on the loopback names may be plain HTTP (and unverified TLS); any other
 * only when the operator lists it (as `host:port` or `host`).
 */
export function registryIsInsecure(registry: string, insecureRegistries: readonly string[]): boolean {
  const host = registry.replace(/:\d+$/, '')
  if (host === 'localhost' || host === '127.0.0.1') return true
  return insecureRegistries.some((r) => r === registry || r === host)
}
