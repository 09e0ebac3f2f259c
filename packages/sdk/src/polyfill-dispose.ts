// Makes `Symbol.asyncDispose` exist on runtimes without explicit resource management, so
// `await using sbx = await Sandbox.create()` works; Node's own polyfill uses the same registry key.
const symbols = Symbol as { asyncDispose?: symbol }
symbols.asyncDispose ??= Symbol.for('nodejs.asyncDispose')
