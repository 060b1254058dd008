/**
 * What a session keeps across daemon restarts: its record's settings plus
 * where its replay stands, nanoseconds as decimal strings.
 */
import { z } from 'zod';
import { drivingSchema, speedFactorSchema } from './session-schema';
import { SESSION_STATES } from './session-state';

const ns = z
  .string()
  .regex(/^\d{1,19}$/)
  .transform((text) => BigInt(text));

export const sessionSnapshotSchema = z.object({
  id: z.string().min(1),
  transaction_id: z.string().min(1),
  speed_factor: speedFactorSchema,
  extra_latency_ns: z.number().int().min(0),
  driving: drivingSchema.nullable().default(null),
  /** saved before owners were kept: counted as the local client's */
  owner: z.string().default('local'),
  state: z.enum(SESSION_STATES),
  created_at: z.string(),
  updated_at: z.string(),
  first_ts: ns,
  last_ts: ns,
  events_total: z.number().int().positive(),
  next_index: z.number().int().min(0),
  /** where reading resumes: the next event's timestamp and id */
  next_start: z.object({ ts: ns, event_id: z.string().optional() }).nullable(),
  floor_ns: ns,
  position_ns: ns,
  wall_ns: ns,
  lateness: z.object({
    max: z.string().regex(/^\d+$/),
    buckets: z.array(z.tuple([z.number().int(), z.number().positive()])),
  }),
});

/** As written to the file. */
export type SessionSnapshot = z.input<typeof sessionSnapshotSchema>;
/** As read back. */
export type RestoredSession = z.output<typeof sessionSnapshotSchema>;
