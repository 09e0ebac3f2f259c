// E2B's template ids and forkbox's template names: the built-ins E2B names its own way, every
// other id taken as a forkbox template name.
/** E2B template ids → forkbox templates; any other id is taken as a forkbox template name. */
const TEMPLATE_ALIASES: Record<string, string> = { 'code-interpreter-v1': 'code-interpreter' }
/** The E2B ids that name a built-in (a user's template may not take them). */
export const E2B_TEMPLATE_IDS: ReadonlySet<string> = new Set(Object.keys(TEMPLATE_ALIASES))
/** forkbox's name for an E2B template id. */
export const forkboxTemplate = (id: string): string => TEMPLATE_ALIASES[id] ?? id
/** E2B's id for a forkbox template. */
export const e2bTemplateId = (template: string) => (template === 'code-interpreter' ? 'code-interpreter-v1' : template)
