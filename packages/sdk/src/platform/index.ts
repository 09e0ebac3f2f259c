// The runtime's parts: Node's here and under tsx; the browser/edge build resolves this module to web.ts.
export * from './node.ts'
