/**
 * What the API answers, as zod schemas: the OpenAPI document describes the
 * responses with them, and the OpenAPI test parses real responses with them,
 * so that the document cannot drift from what the routes send.
 */
import { z } from 'zod';
import { TARGET_KINDS } from '../../core/model/target';
import { PROBLEM_KINDS, PROBLEM_TYPE_BASE } from '../../core/problem-kinds';
import { SESSION_STATES } from '../replay/sessions/session-state';
import { drivingSchema } from '../replay/sessions/session-schema';

/** 19-digit nanosecond integers: JSON numbers, exact in the text; strings under ?int64=string. */
const int64 = z
  .union([z.number(), z.string().regex(/^\d+$/)])
  .meta({ description: 'exact integer (a JSON number of up to 19 digits; a string with ?int64=string)' });
const nsOrNull = z.union([z.number(), z.null()]);

const commonEvent = {
  event_id: z.string().regex(/^[0-9a-f]{40}$/),
  timestamp_ns: int64,
  duration_ns: int64,
  service_name: z.string(),
  transaction_id: z.string().nullable(),
  trace_id: z.string().nullable(),
  node: z.string(),
  pid: z.number().int(),
  tid: z.number().int(),
  comm: z.string(),
  bytes: z.number().int(),
  parent_span_id: z
    .string()
    .regex(/^[0-9a-f]{16}$/)
    .optional()
    .meta({
      description:
        "the parent-id of the W3C `traceparent` that set the event's context: the span an OTLP export of the event is a child of (format=otlp). Absent for a marker's context, and from stores older than this field and from a ClickHouse fleet",
    }),
};

/** The fields every syscall type has (all but block_io). */
const syscallEvent = {
  ...commonEvent,
  syscall: z.string().meta({ description: 'which call: write, sendto, recvfrom, fdatasync, connect, ...' }),
  fd: z.number().int(),
  ret: z.number().int().meta({
    description:
      'bytes (messages for sendmmsg/recvmmsg; 0 for sys_fsync and a connect that succeeded), or a negative errno',
  }),
  target_kind: z.enum(TARGET_KINDS).nullable(),
  target: z
    .string()
    .nullable()
    .meta({ description: 'file path, socket peer (tcp 127.0.0.1:8080), pipe, ...' }),
};

export const sysWriteEventSchema = z
  .strictObject({
    ...syscallEvent,
    event_type: z.literal('sys_write'),
    request_key: z.number().int().optional().meta({
      description:
        "a send that started a request on a socket (its first since a response was read): the key of what the request asked, from its first 128 bytes with literal values replaced (docs/replay.md, 'How a request is recognised'); `replay --exec` matches each response to its request by it. Absent from other events, and from stores, incident files and fleets that predate it",
    }),
  })
  .meta({
    id: 'SysWriteEvent',
    description: 'write, writev, pwrite64, pwritev, pwritev2, sendto (send), sendmsg, sendmmsg, sendfile',
  });

export const sysReadEventSchema = z
  .strictObject({
    ...syscallEvent,
    event_type: z.literal('sys_read'),
    response_ns: int64.nullable().meta({
      description:
        "a socket's first read after a send on it: from the end of that send to the end of this read (the peer's response time as the caller saw it); null otherwise",
    }),
  })
  .meta({
    id: 'SysReadEvent',
    description:
      'read, readv, pread64, preadv, preadv2, recvfrom (recv), recvmsg, recvmmsg: of threads in a transaction, all with --capture-reads',
  });

export const sysFsyncEventSchema = z
  .strictObject({ ...syscallEvent, event_type: z.literal('sys_fsync') })
  .meta({
    id: 'SysFsyncEvent',
    description: 'fsync, fdatasync, sync_file_range (bytes: its nbytes), syncfs',
  });

export const sysConnectEventSchema = z
  .strictObject({ ...syscallEvent, event_type: z.literal('sys_connect') })
  .meta({
    id: 'SysConnectEvent',
    description:
      'duration_ns: until the TCP connection was established or failed, however the caller waited (non-blocking connects too); ret: 0 or its negative errno (-111 refused, -110 timed out, -103 closed by the caller first); target: the peer',
  });

export const blockIoEventSchema = z
  .strictObject({
    ...commonEvent,
    event_type: z.literal('block_io'),
    device: z.string(),
    sector: z.number().int(),
    op: z.string(),
    error: z.number().int(),
  })
  .meta({ id: 'BlockIoEvent' });

export const eventSchema = z
  .discriminatedUnion('event_type', [
    sysWriteEventSchema,
    sysReadEventSchema,
    sysFsyncEventSchema,
    sysConnectEventSchema,
    blockIoEventSchema,
  ])
  .meta({ id: 'Event' });

export const eventPageSchema = z
  .strictObject({
    events: z.array(eventSchema),
    next_cursor: z
      .string()
      .nullable()
      .meta({ description: 'pass as ?cursor= for the next page; null at the end' }),
    retained_from_ns: int64
      .optional()
      .meta({ description: 'present when the range asked for reaches before what retention kept' }),
    sampled: z
      .array(
        z.strictObject({
          node: z.string(),
          from_ns: int64,
          to_ns: int64.nullable().meta({ description: 'null while the run goes on' }),
          one_in: z.number().int().min(2),
        }),
      )
      .optional()
      .meta({
        description:
          'runs the range reaches into that kept one in one_in writes made outside any transaction (--sample-background): scale their counts by one_in',
      }),
  })
  .meta({ id: 'EventPage' });

export const sessionSchema = z
  .strictObject({
    id: z.string(),
    transaction_id: z.string(),
    speed_factor: z.number(),
    extra_latency_ns: z.number().int(),
    driving: drivingSchema.nullable(),
    state: z.enum(SESSION_STATES),
    position_ns: z.number(),
    duration_ns: z.number(),
    events_total: z.number().int(),
    events_emitted: z.number().int(),
    created_at: z.string(),
    updated_at: z.string(),
    timing: z.strictObject({
      lateness_p50_ns: nsOrNull,
      lateness_p99_ns: nsOrNull,
      lateness_max_ns: nsOrNull,
      behind_ns: z
        .number()
        .meta({ description: 'how late the latest release is while the clock cannot keep up, else 0' }),
    }),
  })
  .meta({ id: 'Session' });

export const sessionListSchema = z
  .strictObject({ sessions: z.array(sessionSchema) })
  .meta({ id: 'SessionList' });

export const problemSchema = z
  .strictObject({
    type: z.string().meta({ description: `${PROBLEM_TYPE_BASE}<kind>` }),
    title: z.string(),
    status: z.number().int(),
    code: z.string().meta({ description: 'E_<KIND>: the kind upper-cased' }),
    detail: z.string(),
    errors: z.array(z.strictObject({ param: z.string(), message: z.string() })).optional(),
  })
  .meta({
    id: 'Problem',
    description: `RFC 9457 problem details; kinds: ${Object.keys(PROBLEM_KINDS).join(', ')}`,
  });

const incidentEntrySchema = z.strictObject({
  id: z.string().meta({ description: 'the first 16 hex digits of the digest' }),
  file: z.string(),
  origin: z.enum(['dropped', 'uploaded']),
  transaction_id: z.string(),
  events: z.number().int(),
  digest: z.string(),
  exported_at: z.string(),
  kreplay_version: z.string(),
  source: z.string(),
  first_ns: z.number().nullable(),
  end_ns: z.number().nullable(),
  redacted: z.array(z.string()),
  runs: z.number().int().nullable().meta({ description: 'null: unknown (exported from ClickHouse)' }),
  store_ids: z.array(z.string()),
});

export const incidentListSchema = z
  .strictObject({
    incidents: z.array(incidentEntrySchema),
    skipped: z.array(z.strictObject({ file: z.string(), reason: z.string() })),
  })
  .meta({ id: 'IncidentList' });

export const incidentCreatedSchema = z
  .strictObject({ id: z.string(), transaction_id: z.string(), events: z.number().int(), digest: z.string() })
  .meta({ id: 'IncidentCreated' });

export const livenessSchema = z.strictObject({ status: z.literal('ok') }).meta({ id: 'Liveness' });

export const pageSettingsSchema = z
  .strictObject({
    trace_url: z
      .string()
      .nullable()
      .describe(
        "the daemon's --trace-url: a trace viewer's URL with {trace_id} where an event's trace id goes; null without it",
      ),
  })
  .meta({ id: 'PageSettings' });

export const readinessSchema = z
  .strictObject({
    status: z.enum(['ready', 'degraded']),
    data_dir_error: z.string().nullable(),
    stores: z.array(
      z.strictObject({ node: z.string(), file: z.string(), newest_event_age_s: z.number().nullable() }),
    ),
    skipped: z.array(z.strictObject({ file: z.string(), reason: z.string() })),
    query_workers: z
      .strictObject({
        workers: z.number().int(),
        up: z.number().int(),
        restarting: z.array(
          z.strictObject({
            failures: z.number().int(),
            error: z.string().nullable(),
            restart_in_s: z.number(),
          }),
        ),
      })
      .optional(),
    incident_library: z
      .strictObject({ status: z.enum(['ok', 'stuck']), stuck_for_s: z.number().optional() })
      .optional()
      .describe('stuck while a request to the incident library is past its 30 s deadline'),
  })
  .meta({ id: 'Readiness' });
