/**
 * `kreplay replay --incident FILE` without --exec or --server: the incident's
 * events as NDJSON on stdout, each at its moment on a local clock, in the
 * frames a daemon session streams (the event, `replay_offset_ns`,
 * `replayed_duration_ns`, `emitted_late_ns`; docs/replay.md, "Timing"). Exit 0 when
 * done, 130 after Ctrl-C, 0 when the reader of stdout goes away.
 */
import { exactJson } from '../core/json/exact-json';
import { Schedule } from '../core/replay/schedule';
import type { IncidentSource } from './exec/incident-source';

/** Waits sleep until this close to a due time, then spin (a timer wakes late by a millisecond or so). */
const SPIN_NS = 1_500_000n;

const now = () => process.hrtime.bigint();

function write(text: string): Promise<void> {
  return new Promise((resolve) =>
    process.stdout.write(text) ? resolve() : process.stdout.once('drain', resolve),
  );
}

async function until(deadline: bigint): Promise<void> {
  const wait = deadline - now() - SPIN_NS;
  if (wait > 0n) await new Promise((resolve) => setTimeout(resolve, Number(wait / 1_000_000n)));
  while (now() < deadline) {
    // spin the last stretch
  }
}

export async function playLocally(
  sources: readonly IncidentSource[],
  flags: { speed: number; extraLatencyNs: number },
): Promise<number> {
  const schedule = new Schedule(flags.speed, BigInt(flags.extraLatencyNs));
  let stopped: number | null = null;
  const onInterrupt = () => (stopped = 130);
  const onStdoutError = (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') stopped = 0;
  };
  process.once('SIGINT', onInterrupt);
  process.stdout.on('error', onStdoutError);
  try {
    for (const source of sources) {
      const firstTs = source.events[0]!.timestamp_ns;
      const start = now();
      for (const [index, event] of source.events.entries()) {
        if (stopped !== null) return stopped;
        const offset = schedule.wallOffset(index, event.timestamp_ns - firstTs);
        await until(start + offset);
        const late = now() - (start + offset);
        await write(
          `${exactJson({
            ...event,
            replay_offset_ns: offset,
            replayed_duration_ns: schedule.replayedDuration(event.duration_ns),
            emitted_late_ns: late > 0n ? late : 0n,
          })}\n`,
        );
      }
    }
    return stopped ?? 0;
  } finally {
    process.off('SIGINT', onInterrupt);
    process.stdout.off('error', onStdoutError);
  }
}
