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
}

export class TargetSelection {
  readonly excluded = new Map<string, Exclusion>();
  /** why each excluded event was left out, and whether the user chose so (--target, --skip-target) */
  readonly reasons = new Map<RecordedCall, { reason: string; chosen: boolean }>();
  private readonly only: RegExp[];
  private readonly skip: RegExp[];

  constructor(private readonly flags: SelectionFlags) {
    this.only = flags.target.map(globToRegExp);
    this.skip = flags.skipTarget.map(globToRegExp);
  }

  /** For buildPlan: why `event` (a `call` to `target`, as the build names it) is not held, or null. */
  readonly exclude = (event: RecordedCall, call: CallKind, target: string): string | null => {
    const reason = this.reasonFor(event, target);
    if (reason === null) return null;
    this.reasons.set(event, { reason, chosen: !isMarkerWrite(event) });
    const kind = event.target_kind ?? 'other';
    const key = `${call}\t${target}`;
    const entry = this.excluded.get(key) ?? { call, target, kind, recorded_calls: 0, reason };
    entry.recorded_calls++;
    this.excluded.set(key, entry);
    return reason;
  };

  private reasonFor(event: RecordedCall, target: string): string | null {
    if (isMarkerWrite(event))
      return "not held: the incident's context marker (KREPLAY-CTX), no call of the build";
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
