// What one E2B route module is handed: the E2B layer's app, and what the layer keeps for the life
// of the app (the processes and watchers it started, the upload cap).
import type { Hono } from 'hono'
import type { AppEnv } from '../http/env.ts'
import type { Watchers } from './filesystem/watchers.ts'
import type { Started } from './process/started.ts'

export type E2bApp = Hono<AppEnv>

/** One per app, so two apps in a process never see each other's. */
export interface E2bLayer {
  /** Largest envd file upload (POST /files), after decompression too. */
  maxUploadBytes: number
  processes: Started
  watchers: Watchers
}

export interface E2bRouteModule {
  register(app: E2bApp, layer: E2bLayer): void
}
