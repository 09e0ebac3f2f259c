// `.dockerignore`: which context paths a build may see, by Docker's own rules (@balena/dockerignore ports them).
import dockerignore from '@balena/dockerignore'

/**
 * The paths of `paths` (relative to the context root, `/`-separated) that `.dockerignore` keeps.
 * Docker's rules: patterns are rooted at the context (a leading `/` changes nothing), `*` stays in one
 * directory, `**` spans any number, a later `!pattern` re-includes, the last matching line wins.
 */
export function filterContext(paths: readonly string[], text: string | undefined): string[] {
  if (!text) return [...paths]
  // The package is CommonJS; its `default` is the factory itself.
  const ig = dockerignore.default().add(text)
  return paths.filter((p) => !ig.ignores(p))
}
