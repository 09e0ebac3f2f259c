// The route list: one module per operation, each documenting itself in the OpenAPI registry.
// The edge routes come first and say their own credentials; the rest take the API key.
import type { App } from '../http/env.ts'
import * as auditList from './audit/list.ts'
import * as codeContextCreate from './code/context-create.ts'
import * as codeContextList from './code/context-list.ts'
import * as codeContextRemove from './code/context-remove.ts'
import * as codeContextRestart from './code/context-restart.ts'
import * as codeRun from './code/run.ts'
import * as events from './events.ts'
import * as filesList from './files/list.ts'
import * as filesMkdir from './files/mkdir.ts'
import * as filesRead from './files/read.ts'
import * as filesRemove from './files/remove.ts'
import * as filesRename from './files/rename.ts'
import * as filesStat from './files/stat.ts'
import * as filesUrl from './files/url.ts'
import * as filesWatch from './files/watch.ts'
import * as filesWrite from './files/write.ts'
import * as health from './health.ts'
import * as hostCordon from './hosts/cordon.ts'
import * as hostDrain from './hosts/drain.ts'
import * as hostHeartbeat from './hosts/heartbeat.ts'
import * as hostJoin from './hosts/join.ts'
import * as hostList from './hosts/list.ts'
import * as keysCreate from './keys/create.ts'
import * as keysGet from './keys/get.ts'
import * as keysList from './keys/list.ts'
import * as keysRevoke from './keys/revoke.ts'
import * as keysRotate from './keys/rotate.ts'
import * as keysUpdate from './keys/update.ts'
import * as metrics from './metrics.ts'
import * as ports from './ports/proxy.ts'
import * as processList from './processes/list.ts'
import * as processOutput from './processes/output.ts'
import * as processSignal from './processes/signal.ts'
import * as processStdin from './processes/stdin.ts'
import * as processWait from './processes/wait.ts'
import * as ptyConnect from './pty/connect.ts'
import * as registryDelete from './registries/delete.ts'
import * as registryList from './registries/list.ts'
import * as registryPut from './registries/put.ts'
import * as sandboxCreate from './sandboxes/create.ts'
import * as sandboxEvents from './sandboxes/events.ts'
import * as sandboxExec from './sandboxes/exec.ts'
import * as sandboxFork from './sandboxes/fork.ts'
import * as sandboxGet from './sandboxes/get.ts'
import * as sandboxHibernate from './sandboxes/hibernate.ts'
import * as sandboxKill from './sandboxes/kill.ts'
import * as sandboxList from './sandboxes/list.ts'
import * as sandboxMetrics from './sandboxes/metrics.ts'
import * as sandboxNetwork from './sandboxes/network.ts'
import * as sandboxTimeout from './sandboxes/timeout.ts'
import * as snapshotCreate from './snapshots/create.ts'
import * as snapshotDelete from './snapshots/delete.ts'
import * as snapshotList from './snapshots/list.ts'
import * as templateBuildContext from './templates/build-context.ts'
import * as templateBuildGet from './templates/build-get.ts'
import * as templateBuildLogs from './templates/build-logs.ts'
import * as templateCreate from './templates/create.ts'
import * as templateDelete from './templates/delete.ts'
import * as templateGet from './templates/get.ts'
import * as templateList from './templates/list.ts'
import * as templatePrune from './templates/prune.ts'
import * as templatePublish from './templates/publish.ts'
import * as usageGet from './usage/get.ts'

export interface RouteModule {
  register(app: App): void
}

/**
 * Matched before anything else, each with its own credential sources: exposed ports (by host,
 * whatever the path, or `/s/...`), terminals (WebSocket, `?key=` allowed) and hosts joining
 * and heartbeating (the join token, then the host's own credential).
 */
export const EDGE_ROUTES: readonly RouteModule[] = [ports, ptyConnect, hostJoin, hostHeartbeat]

/** forkbox's REST routes, behind the API key, in the order they are matched. */
export const ROUTES: readonly RouteModule[] = [
  health,
  templateList,
  templateCreate,
  templatePrune,
  templatePublish,
  templateGet,
  templateDelete,
  templateBuildGet,
  templateBuildLogs,
  templateBuildContext,
  registryList,
  registryPut,
  registryDelete,
  sandboxCreate,
  sandboxList,
  sandboxGet,
  sandboxKill,
  sandboxTimeout,
  sandboxNetwork,
  sandboxExec,
  processList,
  processOutput,
  processWait,
  processStdin,
  processSignal,
  sandboxEvents,
  events,
  metrics,
  sandboxMetrics,
  sandboxFork,
  sandboxHibernate,
  snapshotCreate,
  snapshotList,
  snapshotDelete,
  codeRun,
  codeContextCreate,
  codeContextList,
  codeContextRestart,
  codeContextRemove,
  filesList,
  filesStat,
  filesMkdir,
  filesRename,
  filesRead,
  filesWrite,
  filesRemove,
  filesWatch,
  filesUrl,
  keysCreate,
  keysList,
  keysGet,
  keysUpdate,
  keysRotate,
  keysRevoke,
  usageGet,
  auditList,
  hostList,
  hostDrain,
  hostCordon,
]
