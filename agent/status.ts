/** The agent's health figures: rates per status interval, totals since start, and everything lost, by cause. */
import type { KernelCounterName } from '../core/model';
import type { RuntimeHookCounters } from './runtimes/discovery/runtime-hook';

export interface LossCounters {
  malformedMarkers: number;
  /** request heads read in pieces: the thread serves them without context */
  incompleteRequestHeads: number;
  /** request heads read without a valid traceparent nor x-request-id, likewise */
  untracedRequestHeads: number;
  /** request heads read with another request after them in the same read (pipelined), likewise */
  pipelinedRequestHeads: number;
  unknownContexts: number;
  /** writes stored without their target: its record was lost */
  unknownTargets: number;
  /** containers whose runtime state could not be read whole (their events carry what was read; logged) */
  unreadableContainerStates: number;
  /** file targets in a container's root whose host path could not be told: stored as the container names them */
  unresolvedContainerPaths: number;
  /** processes whose events went without their container: the store holds 2^21 - 1 containers already */
  containersPastBound: number;
  corruptRecords: number;
  corruptBytes: number;
  /** events that reached the store while its disk was full */
  diskFullDropped: number;
  /** events the store could not write for another reason (logged) */
  storeErrorDropped: number;
  /** fresh stores opened because the file was deleted, replaced or damaged */
  storeReplacements: number;
}

/** What the Node hook's inspectors met (agent/runtimes/node/inspector-door.ts). */
export interface NodeInspectorCounters {
  /** connects to an inspector the agent opened that the kernel refused (another process's) */
  nodeHookIntrusions: number;
  /** lines Node printed on hooked programs' stderr for the agent's inspectors */
  nodeHookStderrLines: number;
}

export type CounterSnapshot = Record<KernelCounterName, number> &
  LossCounters &
  RuntimeHookCounters &
  NodeInspectorCounters & {
    rowsWritten: number;
    /** stored events that retention removed since the start */
    pruned: number;
    /** of those, events the store cap removed before they were shipped */
    unshippedPruned: number;
  };

const snakeCase = (name: string): string => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Counter names as stored in the counters table: the snapshot's names in snake_case (stable). */
export function storedCounters(s: CounterSnapshot): Record<string, number> {
  return Object.fromEntries(Object.entries(s).map(([name, value]) => [snakeCase(name), value as number]));
}

/** Events of every type lost because the ring was full. */
function ringDropped(s: CounterSnapshot): number {
  return (
    s.sysWriteDropped +
    s.sysReadDropped +
    s.sysFsyncDropped +
    s.sysConnectDropped +
    s.blockIoDropped +
    s.contextDropped
  );
}

/** The counters of events lost (never stored): what "dropped" sums up, and what an incident's completeness reads. */
export const LOST_COUNTERS = [
  'sysWriteDropped',
  'sysReadDropped',
  'sysFsyncDropped',
  'sysConnectDropped',
  'blockIoDropped',
  'contextDropped',
  'threadEntryLost',
  'requestTableFull',
  'connectTableFull',
  'corruptRecords',
  'diskFullDropped',
  'storeErrorDropped',
] as const satisfies readonly (keyof CounterSnapshot)[];

/**
 * LOST_COUNTERS as the counters table names them, and thread_table_full: thread_entry_lost's name in
 * stores written before the kernel kept threads' entries in their tasks (the same loss).
 */
export const LOST_COUNTER_COLUMNS: readonly string[] = [...LOST_COUNTERS.map(snakeCase), 'thread_table_full'];

export function totalLost(s: CounterSnapshot): number {
  return LOST_COUNTERS.reduce((sum, name) => sum + s[name], 0);
}

function perSecond(now: number, before: number, seconds: number): string {
  return Math.round((now - before) / seconds).toString();
}

/**
 * One line per interval, in three parts that never mix: rates over the
 * interval, totals since the start, and the state of the ring and the file.
 */
export function formatStatusLine(
  now: CounterSnapshot,
  before: CounterSnapshot,
  seconds: number,
  ringFill: number,
  dbBytes: number,
): string {
  const fill = ringFill < 0 ? 'n/a' : `${(ringFill * 100).toFixed(1)}%`;
  const rate = (key: KernelCounterName | 'rowsWritten') => perSecond(now[key], before[key], seconds);
  const dropped = ringDropped(now);
  return (
    `rate/s sys_write=${rate('sysWriteEmitted')} sys_read=${rate('sysReadEmitted')}` +
    ` sys_fsync=${rate('sysFsyncEmitted')} sys_connect=${rate('sysConnectEmitted')} block_io=${rate('blockIoEmitted')}` +
    ` stored=${rate('rowsWritten')} dropped=${perSecond(dropped + now.diskFullDropped, ringDropped(before) + before.diskFullDropped, seconds)}` +
    ` | total stored=${now.rowsWritten} pruned=${now.pruned}` +
    (now.unshippedPruned > 0 ? ` (unshipped=${now.unshippedPruned})` : '') +
    ` dropped: ring=${dropped} disk_full=${now.diskFullDropped}` +
    ` store_error=${now.storeErrorDropped} untracked=${now.threadEntryLost + now.requestTableFull + now.connectTableFull}` +
    ` corrupt=${now.corruptRecords}` +
    ` | ring=${fill} db=${(dbBytes / 1048576).toFixed(1)}MiB`
  );
}

const STATUS_TOTALS =
  /total stored=(\d+) pruned=\d+(?: \(unshipped=\d+\))? dropped: ring=(\d+) disk_full=(\d+) store_error=(\d+)/g;

/**
 * The totals of the last status line in `output` (what formatStatusLine writes): events stored and
 * dropped for every reason since the start; undefined before the first line. For the tests and
 * benches that read a running agent's progress.
 */
export function lastStatusTotals(output: string): { stored: number; dropped: number } | undefined {
  const last = [...output.matchAll(STATUS_TOTALS)].pop();
  if (!last) return undefined;
  return { stored: Number(last[1]), dropped: Number(last[2]) + Number(last[3]) + Number(last[4]) };
}
