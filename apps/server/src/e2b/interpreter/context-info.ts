// A forkbox code context as the interpreter's /contexts answers describe it.
import type { CodeContext } from '@forkbox/protocol'

export const contextInfo = (ctx: CodeContext) => ({ id: ctx.id, language: ctx.language, cwd: ctx.cwd ?? '' })
