// What a key's scopes allow a template build: which templates it may build and start from, and
// whether its steps reach any network. Checked before the build exists.
import { AppError, type CreateTemplateRequest, type KeyScopes, type TemplateBuildSpec } from '@forkbox/protocol'

/** Whether a `templates` scope lets the key use `ref` (`name` or `name@version`), as at sandbox create. */
export function inTemplateScope(list: readonly string[], ref: string): boolean {
  return list.includes(ref) || list.includes(ref.split('@')[0] ?? ref)
}

function forbidden(message: string): AppError {
  return new AppError('FORBIDDEN', message, { scope: 'templates' })
}

/**
 * The templates a Dockerfile starts from (`FROM forkbox:NAME`, `COPY --from=forkbox:NAME`), read
 * on the safe side: continuation lines joined on either escape character, quotes and escapes
 * dropped from a reference, and a reference made with a variable refused (the agent expands
 * variables; a `$` could spell any template, and only literal names can be checked here).
 */
export function templatesNamed(dockerfile: string): { names: string[]; variable: boolean } {
  const text = dockerfile.replace(/[\\`][ \t]*\r?\n/g, '')
  const names = new Set<string>()
  let variable = false
  const refs: string[] = []
  for (const line of text.split(/\r?\n/)) {
    const from = /^\s*from\s+(.*)$/i.exec(line)
    if (from) refs.push(...(from[1] ?? '').split(/\s+/))
    if (/^\s*copy\s/i.test(line)) for (const m of line.matchAll(/--from=(\S*)/gi)) refs.push(m[1] ?? '')
  }
  for (const raw of refs) {
    if (raw.includes('$')) variable = true
    const ref = raw.replace(/["'\\`]/g, '')
    if (ref.toLowerCase().startsWith('forkbox:')) names.add(ref.slice('forkbox:'.length))
  }
  return { names: [...names], variable }
}

/**
 * FORBIDDEN (details `{scope: 'templates'}`) when a `templates` scope rules the build out: its
 * name, or a template its Dockerfile starts from, is not in the list. Built-ins count: a scoped key
 * starts only from what it lists.
 */
export function checkBuildScopes(scopes: KeyScopes, req: CreateTemplateRequest): void {
  const list = scopes.templates
  if (!list) return
  if (!inTemplateScope(list, req.name))
    throw forbidden(`this key may only build the templates ${list.join(', ')}, not ${req.name}`)
  if (!req.dockerfile) return
  const { names, variable } = templatesNamed(req.dockerfile)
  if (variable)
    throw forbidden(
      'this key may only use some templates: its FROM and COPY --from name their images without variables',
    )
  for (const name of names)
    if (!inTemplateScope(list, name))
      throw forbidden(`FROM forkbox:${name}: this key may only use the templates ${list.join(', ')}`)
}

/**
 * Where a key's build steps may connect: nowhere for a `noNetwork` key, as its sandboxes. Registry
 * pulls of its images are the platform's traffic (filtered by the pull's own rules), not a
 * step's, and stay allowed.
 */
export function buildNetworkOf(scopes: KeyScopes): Pick<TemplateBuildSpec, 'buildNetwork'> {
  return scopes.noNetwork ? { buildNetwork: 'none' } : {}
}
