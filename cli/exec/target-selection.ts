/**
 * Which recorded calls `kreplay replay --exec` holds: never the incident's own
 * context marker (`KREPLAY-CTX …` written to /dev/null by whatever tagged the
 * transaction: it is no call of the build's), and with `--target` only the
 * targets named, with `--skip-target` none of those named. What is left out
 * is kept per target with the reason, for the report.
 */
import { globToRegExp } from '../../agent/config/glob';
import type { CallKind, RecordedCall } from './exec-plan';

export interface Exclusion {
  call: CallKind;
  target: string;
  kind: string;
  recorded_calls: number;
  reason: string;
}

interface MarkerFields {
  bytes?: number | null;
  transaction_id?: string | null;
  trace_id?: string | null;
}

/** The fields the marker test reads beyond RecordedCall's. */
export const MARKER_FIELDS = [
  'transaction_id',
  'trace_id',
] as const satisfies readonly (keyof MarkerFields)[];

/** The sizes the marker write of `txn` (and trace) has, with or without its newline. */
function markerSizes(event: MarkerFields): number[] {
  if (!event.transaction_id) return [];
  const texts = [`KREPLAY-CTX txn=${event.transaction_id}`];
  if (event.trace_id) texts.push(`${texts[0]} trace=${event.trace_id}`);
  return texts.flatMap((text) => [Buffer.byteLength(text), Buffer.byteLength(text) + 1]);
}

/** The write that tagged the transaction: to /dev/null, exactly a marker's size. */
export function isMarkerWrite(event: RecordedCall & MarkerFields): boolean {
  return (
    event.event_type === 'sys_write' &&
    event.target === '/dev/null' &&
    typeof event.bytes === 'number' &&
    markerSizes(event).includes(event.bytes)
  );
}

export interface SelectionFlags {
  target: string[];
  skipTarget: string[];
  /** --with-client: hold the client's calls too (by default only the service's side is replayed) */
  withClient?: boolean;
}

/**
 * The client of an HTTP incident: the process that wrote the request head. Its head write is
 * what gave the transaction its context, so it is the transaction's first event (a send on a
 * socket), and the service (the process that read the head, and its descendants) is every other
 * process of the transaction. Null when the incident does not start so, or holds one process.
 */
export function clientPid(events: readonly RecordedCall[]): number | null {
  const first = events[0];
  if (!first || first.event_type !== 'sys_write' || first.target_kind !== 'socket') return null;
  if (typeof first.pid !== 'number') return null;
  return events.some((e) => typeof e.pid === 'number' && e.pid !== first.pid) ? first.pid : null;
}

export class TargetSelection {
  readonly excluded = new Map<string, Exclusion>();
  /** why each excluded event was left out, and whether the user chose so (--target, --skip-target) */
  readonly reasons = new Map<RecordedCall, { reason: string; chosen: boolean }>();
  private readonly only: RegExp[];
  private readonly skip: RegExp[];

  /** `client`: the client's pid (clientPid), whose calls are not the service's to replay */
  constructor(
    private readonly flags: SelectionFlags,
    private readonly client: number | null = null,
  ) {
    this.only = flags.target.map(globToRegExp);
    this.skip = flags.skipTarget.map(globToRegExp);
  }

  /** For buildPlan: why `event` (a `call` to `target`, as the build names it) is not held, or null. */
  readonly exclude = (event: RecordedCall, call: CallKind, target: string): string | null => {
    const reason = this.reasonFor(event, target);
    if (reason === null) return null;
    this.reasons.set(event, { reason, chosen: !isMarkerWrite(event) && !this.isClient(event) });
    const kind = event.target_kind ?? 'other';
    const key = `${call}\t${target}`;
    const entry = this.excluded.get(key) ?? { call, target, kind, recorded_calls: 0, reason };
    entry.recorded_calls++;
    this.excluded.set(key, entry);
    return reason;
  };

  private isClient(event: RecordedCall): boolean {
    return !this.flags.withClient && this.client !== null && event.pid === this.client;
  }

  private reasonFor(event: RecordedCall, target: string): string | null {
    if (isMarkerWrite(event))
      return "not held: the incident's context marker (KREPLAY-CTX), no call of the build";
    if (this.isClient(event))
      return `not held: the client's call (pid ${this.client}, which wrote the request head): a replay replays the service's side (--with-client holds it too)`;
    if (this.only.length > 0 && !this.only.some((re) => re.test(target)))
      return `not held: not selected by --target ${this.flags.target.join(' ')}`;
    const skipped = this.skip.findIndex((re) => re.test(target));
    if (skipped !== -1) return `not held: --skip-target ${this.flags.skipTarget[skipped]}`;
    return null;
  }
}

/** `--target`/`--skip-target`, repeatable shell-style patterns (`*`, `?`) on targets as the build names them. */
export function collectPatterns(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}
