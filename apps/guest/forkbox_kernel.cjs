// forkbox JavaScript kernel: the long-lived Node.js interpreter behind a `javascript` code context.
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
}
sandbox.globalThis = sandbox
const context = vm.createContext(sandbox)
let count = 0

function represent(value) {
  const data = { text: typeof value === 'string' ? util.inspect(value) : util.inspect(value, { depth: 4 }) }
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
    const code = String(req.code ?? '')
    let value
    if (/\bawait\b/.test(code)) {
      value = await vm.runInContext(`(async () => {\n${code}\n})()`, context, { filename, breakOnSigint: true })
    } else {
      value = vm.runInContext(code, context, { filename, breakOnSigint: true })
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
