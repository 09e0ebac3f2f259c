// Serves Chromium's DevTools endpoint (loopback only, and only for Host headers that are an IP or
// localhost) on every address of the sandbox: a client that reaches the sandbox through an exposed
// port under any domain gets the endpoint, and the WebSocket URLs it hands out name the address the
// client used. Usage: node cdp-forward.cjs LISTEN_PORT CHROMIUM_PORT
'use strict'
const http = require('node:http')
const net = require('node:net')

const listenPort = Number(process.argv[2])
const upstreamPort = Number(process.argv[3])
const upstream = `127.0.0.1:${upstreamPort}`
const HOST = /^[A-Za-z0-9.\-:[\]]{1,255}$/

/** The address the client used, as far as it is safe to put into a URL. */
function clientHost(req) {
  const host = req.headers.host
  return host && HOST.test(host) ? host : `127.0.0.1:${listenPort}`
}

const server = http.createServer((req, res) => {
  const headers = { ...req.headers, host: upstream }
  delete headers['accept-encoding']
  const up = http.request(
    { host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers },
    (r) => {
      const chunks = []
      r.on('data', (c) => chunks.push(c))
      r.on('end', () => {
        const body = Buffer.from(Buffer.concat(chunks).toString('utf8').split(upstream).join(clientHost(req)))
        const out = { ...r.headers, 'content-length': String(body.length) }
        delete out['transfer-encoding']
        res.writeHead(r.statusCode || 502, out).end(body)
      })
      r.on('error', () => res.destroy())
    },
  )
  up.on('error', () => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' })
    res.end('the browser is not answering\n')
  })
  req.pipe(up)
})

server.on('upgrade', (req, socket, head) => {
  const up = net.connect(upstreamPort, '127.0.0.1', () => {
    const lines = [`${req.method} ${req.url} HTTP/1.1`]
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i]
      lines.push(`${name}: ${name.toLowerCase() === 'host' ? upstream : req.rawHeaders[i + 1]}`)
    }
    up.write(`${lines.join('\r\n')}\r\n\r\n`)
    if (head.length) up.write(head)
    up.pipe(socket)
    socket.pipe(up)
  })
  const close = () => {
    up.destroy()
    socket.destroy()
  }
  up.on('error', close)
  socket.on('error', close)
  up.on('close', close)
  socket.on('close', close)
})

server.listen(listenPort, '0.0.0.0')
