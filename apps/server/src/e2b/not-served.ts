// The control-plane calls forkbox does not serve, each refused (NOT_IMPLEMENTED, behind the API
// key) with what to use instead.
import { withApiKey } from './auth.ts'
import { unsupported } from './errors.ts'
import type { E2bApp } from './route-module.ts'

const notServed = (what: string, instead: string) => withApiKey(async () => unsupported(what, instead))

export function register(app: E2bApp): void {
  app.get('/sandboxes/:id/logs', notServed('sandbox logs', 'use GET /v1/sandboxes/{id}/events'))
  app.all('/templates', notServed('listing templates this way', 'use GET /v1/templates'))
  app.all('/templates/tags', notServed('template tags', 'every build is a new version: create from name@version'))
  app.all('/templates/:id/tags', notServed('template tags', 'every build is a new version: create from name@version'))
  app.all('/v2/templates', notServed('this template call', 'build with Template.build (POST /v3/templates)'))
  app.all('/volumes/*', notServed('volumes', 'use files.write'))
}
