// A TCP connection to a sandbox's port, as `AgentApi.connectPort` hands it out: reads paused
// while the receiver has not taken the last chunk, writes resolved once the socket took them.
import { connect } from 'node:net'
import { AppError, type PortConnection } from '@forkbox/protocol'

const CONNECT_TIMEOUT_MS = 10_000

export function connectTcp(
  host: string,
  port: number,
  onData: (chunk: Uint8Array) => void | Promise<void>,
): Promise<PortConnection> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port })
    const timer = setTimeout(() => socket.destroy(new Error('timed out')), CONNECT_TIMEOUT_MS)
    const failed = (err: Error) => {
      clearTimeout(timer)
      reject(new AppError('PORT_UNREACHABLE', `the sandbox did not answer on port ${port}: ${err.message}`, { port }))
    }
    socket.once('error', failed)
    socket.once('connect', () => {
      clearTimeout(timer)
      socket.off('error', failed)
      const closed = new Promise<void>((done) => {
        let delivering: Promise<void> = Promise.resolve()
        socket.on('data', (chunk) => {
          socket.pause()
          delivering = delivering
            .then(() => onData(chunk))
            .then(
              () => {
                socket.resume()
              },
              () => {
                socket.destroy()
              },
            )
        })
        socket.on('error', () => {})
        socket.once('close', () => {
          delivering.finally(done)
        })
      })
      resolve({
        write: (chunk) =>
          new Promise((ok, fail) => {
            if (socket.destroyed) return fail(new AppError('PORT_UNREACHABLE', 'the connection is closed'))
            socket.write(chunk, (err) => (err ? fail(err) : ok()))
          }),
        end: () => socket.end(),
        destroy: () => socket.destroy(),
        closed,
      })
    })
  })
}
