/**
 * The bounds of replay sessions, apart from the schemas and the service that
 * enforce them: the CLI's flags show them without loading zod or express.
 */
export const DEFAULT_MAX_SESSIONS = 64;
/** A quarter of the total: one client cannot take every slot. */
export const DEFAULT_MAX_SESSIONS_PER_CLIENT = 16;
export const DEFAULT_SESSION_TTL_SECONDS = 600;
export const DEFAULT_IDLE_SESSION_TTL_SECONDS = 3600;

export const MAX_EXTRA_LATENCY_NS = 60_000_000_000;
/** Replay speed factors a session accepts (the API, its snapshots and the CLI's --speed). */
export const SPEED_FACTOR = { min: 0.001, max: 1000 } as const;
