// A sandbox's life in seconds, as create, connect, fork and timeout take it.
import { MAX_TTL_SECONDS } from '@forkbox/protocol'
import { z } from 'zod'

export const TimeoutSeconds = z.number().int().min(1).max(MAX_TTL_SECONDS)
