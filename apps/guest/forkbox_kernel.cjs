// forkbox JavaScript kernel: the long-lived Node.js interpreter behind a `javascript` (or `typescript`) code context.
// Same protocol as forkbox_kernel.py: requests as JSON lines on stdin, messages as JSON lines on
// fd 3 ({t: ready | stream | display | done}). Top-level `let`/`const`/`function` persist between
// cells (one vm context, one script scope); the last expression's value is the main result; a
// cell using `await` runs as an async function (its `return` value is the result). A SIGINT
// interrupts the running cell, not the kernel.
'use strict'
const fs = require('node:fs')
const readline = require('node:readline')
const util = require('node:util')
const vm = require('node:vm')

const MSG_FD = 3
/** `typescript`: cells are TypeScript, transpiled (types dropped, nothing checked) by the image's `typescript` module. */
const LANGUAGE = process.argv[2] === 'typescript' ? 'typescript' : 'javascript'
let ts = null
if (LANGUAGE === 'typescript') {
  try {
    ts = require('typescript')
  } catch {
    // each cell reports it: the kernel itself stays up
  }
}

/** A cell's JavaScript: itself, or its TypeScript with the types taken out. */
function javascriptOf(code) {
  if (LANGUAGE !== 'typescript') return code
  if (!ts)
    throw new Error("this template's image has no TypeScript (Debian's node-typescript): typescript cells cannot run")
  return ts.transpileModule(code, {
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, sourceMap: false },
    reportDiagnostics: false,
  }).outputText
}

function emit(msg) {
  fs.writeSync(MSG_FD, `${JSON.stringify(msg)}\n`)
}

function stream(name) {
  return (...args) => emit({ t: 'stream', name, text: `${util.format(...args)}\n` })
}

const out = stream('stdout')
const err = stream('stderr')
const console_ = {
  log: out,
  info: out,
  debug: out,
  error: err,
  warn: err,
  dir: (v) => out(util.inspect(v)),
  table: (v) => out(util.inspect(v)),
}

const sandbox = {
  console: console_,
  require,
  process,
  Buffer,
  setTimeout,
  clearTimeout,
  setInterval,
  clearInterval,
  setImmediate,
  clearImmediate,
  URL,
  TextEncoder,
  TextDecoder,
  fetch: globalThis.fetch,
  structuredClone,
  display: (value) => emit({ t: 'display', main: false, data: represent(value) }),
  __forkboxImport: (spec) => importFor(spec),
}
sandbox.globalThis = sandbox
const context = vm.createContext(sandbox)
let count = 0

function represent(value) {
  // a string as itself (as E2B's interpreter shows it), anything else as util.inspect does
  const data = { text: typeof value === 'string' ? value : util.inspect(value, { depth: 4 }) }
  if (value && typeof value === 'object') {
    if (typeof value.toHTML === 'function') data.html = String(value.toHTML())
    try {
      data.json = JSON.parse(JSON.stringify(value))
    } catch {
      // not JSON-shaped (cycles, BigInt): the text form stands
    }
  }
  return data
}

/**
 * ES module imports as the dynamic imports a script can run: `import x from 'm'`,
 * `import { a, b as c } from 'm'`, `import * as ns from 'm'`, `import 'm'` (at the start of a
 * line). Their names become globals of the context, so later cells see them as they see any
 * top-level name.
 */
function rewriteImports(code) {
  const IMPORT =
    /^[ \t]*import\s+(?:(?<what>[\w$*{][^'";]*?)\s+from\s+)?(?<q>['"])(?<spec>[^'"]+)\k<q>[ \t]*;?[ \t]*$/gm
  let found = false
  const out = code.replace(IMPORT, (_line, what, _q, spec) => {
    found = true
    const load = `await __forkboxImport(${JSON.stringify(spec)})`
    if (!what) return `${load};`
    const parts = []
    let rest = what.trim()
    const star = /^(?:([\w$]+)\s*,\s*)?\*\s+as\s+([\w$]+)$/.exec(rest)
    if (star) {
      const [, def, ns] = star
      return `${ns} = ${load};${def ? ` ${def} = ${ns}.default;` : ''}`
    }
    const def = /^([\w$]+)\s*(?:,\s*|$)/.exec(rest)
    if (def) {
      parts.push(`default: ${def[1]}`)
      rest = rest.slice(def[0].length).trim()
    }
    const named = /^\{([^}]*)\}$/.exec(rest)
    if (named) {
      for (const n of named[1]
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean)) {
        const m = /^([\w$]+)(?:\s+as\s+([\w$]+))?$/.exec(n)
        if (!m) return _line
        parts.push(m[2] ? `${m[1]}: ${m[2]}` : m[1])
      }
    } else if (rest) return _line
    return `({ ${parts.join(', ')} } = ${load});`
  })
  return { code: out, found }
}

/** `import(spec)` for a cell: resolved from the context's working directory, as `require` there would. */
async function importFor(spec) {
  if (spec.startsWith('node:') || require('node:module').builtinModules.includes(spec)) return import(spec)
  const { createRequire } = require('node:module')
  const { pathToFileURL } = require('node:url')
  const resolved = createRequire(`${process.cwd()}/`).resolve(spec)
  return import(pathToFileURL(resolved).href)
}

/**
 * An async cell's body whose last line, when it is an expression, is returned (its value is the
 * cell's result, as in a synchronous cell); the body as it was when that line is not one.
 */
function returningLast(code) {
  const lines = code.split('\n')
  let i = lines.length - 1
  while (i >= 0 && !lines[i].trim()) i--
  if (i < 0) return code
  const last = lines[i].trim().replace(/;+$/, '')
  if (!last || /^(return|const|let|var|function|class|if|for|while|do|switch|try|throw|import|export)\b/.test(last))
    return code
  const candidate = `${lines.slice(0, i).join('\n')}\nreturn (${last}\n)`
  try {
    new vm.Script(`(async () => {\n${candidate}\n})()`)
    return candidate
  } catch {
    return code
  }
}

function errorOf(e) {
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e)) {
    return { name: e.name || 'Error', value: String(e.message ?? e), traceback: String(e.stack ?? '') }
  }
  return { name: 'Error', value: util.inspect(e), traceback: '' }
}

async function run(req) {
  const silent = Boolean(req.silent)
  if (!silent) count += 1
  const env = req.env || {}
  const saved = {}
  for (const [k, v] of Object.entries(env)) {
    saved[k] = process.env[k]
    process.env[k] = String(v)
  }
  const filename = `cell-${count}.js`
  try {
    const imports = rewriteImports(javascriptOf(String(req.code ?? '')))
    const code = imports.code
    const options = { filename, breakOnSigint: true, importModuleDynamically: importFor }
    let value
    if (imports.found || /\bawait\b/.test(code)) {
      value = await vm.runInContext(`(async () => {\n${returningLast(code)}\n})()`, context, options)
    } else {
      value = vm.runInContext(code, context, options)
      if (value && typeof value.then === 'function') value = await value
    }
    if (value !== undefined && !silent) emit({ t: 'display', main: true, data: represent(value) })
    return { count: silent ? null : count, error: null }
  } catch (e) {
    const error = errorOf(e)
    if (/interrupted by SIGINT/.test(error.value)) error.name = 'KeyboardInterrupt'
    return { count: silent ? null : count, error }
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k]
      else process.env[k] = v
    }
  }
}

function configure(req) {
  for (const [k, v] of Object.entries(req.env || {})) process.env[k] = String(v)
}

// an interrupt between cells (or while awaiting) must not end the kernel
process.on('SIGINT', () => {})
process.on('uncaughtException', (e) => err(`uncaught: ${e?.stack ?? e}`))
process.on('unhandledRejection', (e) => err(`unhandled rejection: ${e?.stack ?? e}`))

const lines = readline.createInterface({ input: fs.createReadStream(null, { fd: 0 }) })
const queue = []
let busy = false

async function pump() {
  if (busy) return
  busy = true
  while (queue.length > 0) {
    const line = queue.shift()
    let req
    try {
      req = JSON.parse(line)
    } catch {
      emit({ t: 'done', count: null, error: { name: 'ProtocolError', value: 'malformed request', traceback: '' } })
      continue
    }
    if (req.op === 'configure') {
      configure(req)
      emit({ t: 'done', count: null, error: null })
    } else {
      const { count: n, error } = await run(req)
      emit({ t: 'done', count: n, error })
    }
  }
  busy = false
}

lines.on('line', (line) => {
  queue.push(line)
  void pump()
})
lines.on('close', () => process.exit(0))
emit({ t: 'ready', pid: process.pid })
