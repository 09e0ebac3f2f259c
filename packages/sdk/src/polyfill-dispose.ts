// Makes `Symbol.asyncDispose` exist on runtimes without explicit resource management, so
// `await using sbx = await Sandbox.create()` works; Node's own polyfill uses the same registry key.
const symbols = Symbol as { asyncDispose?: symbol }
symbols.asyncDispose ??= Symbol.for('nodejs.asyncDispose')

// The types say so too: a project whose `lib` predates ES2024's disposables (and has no
// @types/node) type-checks the shipped `[Symbol.asyncDispose]()` methods. The declaration is the
// one TypeScript's own lib and @types/node make, so the three merge.
declare global {
  interface SymbolConstructor {
    readonly asyncDispose: unique symbol
  }
}
