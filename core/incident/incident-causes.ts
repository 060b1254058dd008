/**
 * Which calls made a transaction slow or fail: its causes (docs/query.md, "What an
 * incident marks as its cause"). Marked at export, so that `incident show`
 * leads with them and a replay against a build checks it exercised them.
 *
 * The rule, one owner:
 * - a call's wait is its duration; a read's is its `response_ns` (the
 *   upstream's time from the end of a send on the connection), and a read
 *   with none recorded waited for input to arrive (a request, a pipe's
 *   writer), which is idle time, no cause;
 * - a wait of at least CAUSE_SHARE of the transaction's span and at least
 *   CAUSE_MIN_WAIT_NS is a candidate;
 * - a candidate whose wait encloses another candidate's (a client waiting on
 *   the service that waited on Redis) is that wait's effect and is dropped:
 *   the innermost waits are the causes;
 * - a failed call with an errno that ends an exchange (refused, reset, timed
 *   out, broken pipe, I/O error, disk full, unreachable) and a failed block
 *   request are causes whatever their time.
 */
import type { IncidentCause } from './incident-types';

/** A wait shorter than this share of the transaction's span is not one of its causes. */
export const CAUSE_SHARE = 0.1;
/** Nor one shorter than this: timing noise on any machine. */
export const CAUSE_MIN_WAIT_NS = 1_000_000n;

/** errnos that end an exchange with a peer or a device: a failure the transaction could not hide. */
const FATAL_ERRNOS: Readonly<Record<number, string>> = {
  5: 'EIO',
  28: 'ENOSPC',
  32: 'EPIPE',
  101: 'ENETUNREACH',
  103: 'ECONNABORTED',
  104: 'ECONNRESET',
  110: 'ETIMEDOUT',
  111: 'ECONNREFUSED',
  113: 'EHOSTUNREACH',
  122: 'EDQUOT',
};

/** The fields of an event the rule reads. */
export interface CauseFields {
  event_type: string;
  timestamp_ns: bigint;
  duration_ns: bigint;
  ret?: number | null;
  error?: number | null;
  response_ns?: bigint | string | number | null;
}

/** A call's wait, and whether it is the upstream's response time. */
export function waitOf(event: CauseFields): { ns: bigint; response: boolean } {
  if (event.event_type !== 'sys_read') return { ns: event.duration_ns, response: false };
  const response = event.response_ns;
  // a read of the stream's end is no response (older recordings timed it as one)
  return response === null || response === undefined || event.ret === 0
    ? { ns: 0n, response: false }
    : { ns: BigInt(response), response: true };
}

function errnoName(event: CauseFields): string | null {
  if (event.event_type === 'block_io') return event.error ? `block error ${event.error}` : null;
  const ret = event.ret ?? 0;
  return ret < 0 ? (FATAL_ERRNOS[-ret] ?? null) : null;
}

/**
 * Collects the candidates of one transaction's events as they stream past (in
 * replay order), keeping only waits of a millisecond or more and failures.
 */
export class CauseFinder {
  private readonly candidates: (IncidentCause & { startNs: bigint; endNs: bigint })[] = [];
  private firstNs: bigint | null = null;
  private endNs: bigint | null = null;
  private index = 0;

  add(event: CauseFields): void {
    const index = this.index++;
    const end = event.timestamp_ns + event.duration_ns;
    this.firstNs ??= event.timestamp_ns;
    if (this.endNs === null || end > this.endNs) this.endNs = end;
    const wait = waitOf(event);
    const errno = errnoName(event);
    if (wait.ns < CAUSE_MIN_WAIT_NS && errno === null) return;
    this.candidates.push({
      index,
      cause: errno !== null ? 'error' : wait.response ? 'response' : 'duration',
      wait_ns: wait.ns,
      errno,
      startNs: end - wait.ns,
      endNs: end,
    });
  }

  /** The causes, longest wait first (failures among them by their wait too). */
  finish(): IncidentCause[] {
    if (this.firstNs === null) return [];
    const span = this.endNs! - this.firstNs;
    const floor = BigInt(Math.ceil(Number(span) * CAUSE_SHARE));
    // by start: the waits an outer one may enclose start within it, so each scan stops at its end
    const waits = this.candidates
      .filter((c) => c.wait_ns >= floor && c.wait_ns >= CAUSE_MIN_WAIT_NS)
      .sort((a, b) => (a.startNs < b.startNs ? -1 : a.startNs > b.startNs ? 1 : 0));
    const effects = new Set<(typeof waits)[number]>();
    waits.forEach((outer, i) => {
      // equal starts sort either way: look back over them too
      let j = i;
      while (j > 0 && waits[j - 1]!.startNs === outer.startNs) j--;
      for (; j < waits.length && waits[j]!.startNs <= outer.endNs; j++) {
        const inner = waits[j]!;
        if (inner !== outer && inner.endNs <= outer.endNs && inner.wait_ns < outer.wait_ns) {
          effects.add(outer);
          break;
        }
      }
    });
    const causes = new Set(waits.filter((w) => !effects.has(w)));
    const kept = this.candidates.filter((c) => c.cause === 'error' || causes.has(c));
    return kept
      .sort((a, b) => (a.wait_ns === b.wait_ns ? a.index - b.index : a.wait_ns > b.wait_ns ? -1 : 1))
      .map(({ index, cause, wait_ns, errno }) => ({ index, cause, wait_ns, errno }));
  }
}

/** The causes of a transaction's events in replay order. */
export function incidentCauses(events: Iterable<CauseFields>): IncidentCause[] {
  const finder = new CauseFinder();
  for (const event of events) finder.add(event);
  return finder.finish();
}
