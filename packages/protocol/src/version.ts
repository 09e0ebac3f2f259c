// forkbox's version, in one place: the server reports it (the `Forkbox-Version` header on every
// response, `/healthz`, `/openapi.json`), the SDKs send and compare it, and the packages'
// manifests must say the same (a unit test checks them).
export const FORKBOX_VERSION = '0.1.0'

/** The response header that carries the server's version. */
export const VERSION_HEADER = 'Forkbox-Version'

/** The `message` prefix of the server's 404 for a route it does not serve (all versions so far). */
export const NO_ROUTE_PREFIX = 'no route '
