/** The agent's health figures: rates per status interval, and everything lost, by cause. */
import type { KernelCounterName } from '../core/model';

export interface LossCounters {
  malformedMarkers: number;
  unknownContexts: number;
  /** writes stored without their target: its record was lost */
  unknownTargets: number;
  corruptRecords: number;
  corruptBytes: number;
}

export type CounterSnapshot = Record<KernelCounterName, number> & LossCounters & { rowsWritten: number };

const snakeCase = (name: string): string => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Counter names as stored in the counters table: the snapshot's names in snake_case (stable). */
export function storedCounters(s: CounterSnapshot): Record<string, number> {
  return Object.fromEntries(Object.entries(s).map(([name, value]) => [snakeCase(name), value as number]));
}

export function totalLost(s: CounterSnapshot): number {
  return (
    s.sysWriteDropped +
    s.blockIoDropped +
    s.contextDropped +
    s.threadTableFull +
    s.requestTableFull +
    s.corruptRecords
  );
}

function perSecond(now: number, before: number, seconds: number): string {
  return Math.round((now - before) / seconds).toString();
}

export function formatStatusLine(
  now: CounterSnapshot,
  before: CounterSnapshot,
  seconds: number,
  ringFill: number,
  dbBytes: number,
): string {
  const fill = ringFill < 0 ? 'n/a' : `${(ringFill * 100).toFixed(1)}%`;
  return (
    `events/s sys_write=${perSecond(now.sysWriteEmitted, before.sysWriteEmitted, seconds)}` +
    ` block_io=${perSecond(now.blockIoEmitted, before.blockIoEmitted, seconds)}` +
    ` stored/s=${perSecond(now.rowsWritten, before.rowsWritten, seconds)}` +
    ` dropped sys_write=${now.sysWriteDropped} block_io=${now.blockIoDropped} context=${now.contextDropped}` +
    ` untracked=${now.threadTableFull + now.requestTableFull} corrupt=${now.corruptRecords}` +
    ` ring=${fill} db=${(dbBytes / 1048576).toFixed(1)}MiB`
  );
}
