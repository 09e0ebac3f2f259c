// `forkbox server`: a control-plane replica with no agent of its own; hosts (`forkbox agent`)
// join it, and any number of replicas share one Postgres.
import { loadServerHostConfig, type ServerHostConfig, type ServerHostOptions } from './config.ts'
import { type ControlPlaneHost, startControlPlane } from './start-control-plane.ts'

export type ServerHost = ControlPlaneHost<ServerHostConfig>

export async function startServerHost(opts: ServerHostOptions = {}): Promise<ServerHost> {
  return await startControlPlane(loadServerHostConfig(opts))
}
