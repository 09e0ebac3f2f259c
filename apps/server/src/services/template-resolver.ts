// What a create's template is, looked up once: a user's from its build record (no agent asked
// when the record says it all), a built-in from the agent. The sandbox service sees only this.
import { type AgentApi, AppError, type TemplateBuildSpec, type TemplateInfo } from '@forkbox/protocol'

export interface TemplateResolver {
  /** The template a create of `owner` names, as the agent knows it: its name, resources and ports. */
  resolve(owner: string, ref: string): Promise<TemplateInfo>
  /** How a template (the agent's name) is shown: a user's as `name@version`. */
  label(agentName: string): Promise<string>
}

/**
 * The agent's own info on template `name`. A fleet answers templates from a cache of a second or
 * two: a template just built through another replica is asked for again (ensureTemplate
 * refreshes it) before it counts as unknown; a template built on first use (a built-in
 * Dockerfile's) knows its image config, EXPOSE included, only once built.
 */
export async function agentTemplateInfo(agent: AgentApi, name: string): Promise<TemplateInfo> {
  const find = async () => (await agent.templates()).find((t) => t.name === name)
  let info = await find()
  if (!info) {
    await agent.ensureTemplate(name).catch(() => {})
    info = await find()
  }
  if (!info) throw new AppError('TEMPLATE_NOT_FOUND', `no template named ${name}`)
  if (info.ready) return info
  await agent.ensureTemplate(name)
  return (await find()) ?? info
}

/**
 * A ready build's template as its record gives it, or null when only the agent knows part of it
 * (an image's EXPOSE is read from its config on the host).
 */
export function recordedTemplateInfo(spec: TemplateBuildSpec): TemplateInfo | null {
  const { source } = spec
  if (source.kind !== 'dockerfile' || !source.built) return null
  const ports = source.built.exposedPorts
  return {
    name: spec.name,
    description: spec.description,
    defaults: spec.resources.defaults,
    maxima: spec.resources.maxima,
    ready: true,
    ...(ports.length > 0 ? { exposedPorts: ports } : {}),
  }
}

/** Only the agent's templates, by their own names (a control plane with no catalogue: tests). */
export function agentTemplates(agent: AgentApi): TemplateResolver {
  return { resolve: (_owner, ref) => agentTemplateInfo(agent, ref), label: async (name) => name }
}
