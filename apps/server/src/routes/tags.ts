// The API reference's sections, in the order /docs shows them: every operation names one (its
// `tags`), so the reference groups operations by the resource they act on.
export const API_TAGS = [
  {
    name: 'Sandboxes',
    description: 'Create, list, inspect, fork, hibernate and kill sandboxes; their time to live and network policy.',
  },
  {
    name: 'Processes',
    description:
      'Run a command in a sandbox (`exec`: wait, stream or start in the background) and follow, feed, signal and wait for background processes.',
  },
  { name: 'Code', description: 'Run code cells in persistent interpreters, and manage the code contexts they run in.' },
  {
    name: 'Files',
    description: "Read, write, list, move and watch a sandbox's files; signed URLs for one file without a key.",
  },
  { name: 'Terminals', description: 'Interactive terminals (PTYs) over a WebSocket.' },
  {
    name: 'Snapshots',
    description: 'Snapshots of running sandboxes (memory, processes, disk) to start new sandboxes from.',
  },
  {
    name: 'Templates',
    description:
      'Templates sandboxes start from: built from a Dockerfile or an image, their builds and build logs, publishing.',
  },
  { name: 'Registries', description: "A key's logins for the container registries its templates pull from." },
  { name: 'Events', description: "Sandboxes' lifecycle events: a list, or past then live as Server-Sent Events." },
  {
    name: 'Metrics',
    description: "A sandbox's CPU, memory and disk use, a key's usage over time, and the host's Prometheus metrics.",
  },
  { name: 'Keys', description: 'API keys: create, list, update (quotas), rotate and revoke (the admin key).' },
  { name: 'Audit', description: 'The audit log of key and admin actions (the admin key).' },
  { name: 'Hosts', description: "The fleet's hosts: joining, heartbeats, cordon and drain." },
  { name: 'Health', description: 'Liveness and version, with no key.' },
] as const satisfies readonly { name: string; description: string }[]

export type ApiTag = (typeof API_TAGS)[number]['name']

/** An operation's `tags`: the section of the reference it is listed under. */
export function tagged(tag: ApiTag): ApiTag[] {
  return [tag]
}
