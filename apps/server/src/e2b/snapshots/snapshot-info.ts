// A forkbox snapshot as E2B lists it: its names (what `Sandbox.create` takes) are its name, if
// given, and its id.
import type { Snapshot } from '@forkbox/protocol'

export const snapshotInfo = (s: Snapshot) => ({ snapshotID: s.id, names: s.name ? [s.name, s.id] : [s.id] })
