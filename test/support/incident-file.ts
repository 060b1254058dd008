/** Incident files for replay tests, written by core/incident's own writer. */
import { writeFileSync } from 'node:fs';
import { IncidentWriter } from '../../core/incident/incident-writer';
import type { IncidentRun } from '../../core/incident/incident-types';
import type { ApiEvent } from '../../core/model';

/** A recording run of the test's: its node and the counters it lost over the incident. */
export interface TestRun {
  node: string;
  counters: Record<string, number>;
}

function run({ node, counters }: TestRun): IncidentRun {
  return {
    node,
    store_id: '000000000000',
    started_ns: 0n,
    stopped_ns: null,
    kernel: 'test',
    agent_version: 'test',
    clock_error_ns: 0n,
    clock_offset_ns: 0n,
    sample_background: 1,
    filter: null,
    start_reason: null,
    exit_reason: null,
    counters,
    counters_from_ns: null,
    counters_to_ns: null,
  };
}

/** Writes `events` (in replay order, one transaction) as that transaction's incident file; runs null: unknown. */
export function writeIncident(
  file: string,
  events: readonly ApiEvent[],
  runs: TestRun[] | null = [{ node: 'test', counters: {} }],
): void {
  const writer = new IncidentWriter({ transactionId: events[0]!.transaction_id!, source: 'node-stores' });
  for (const event of events) writer.add(event);
  writeFileSync(file, writer.finish(runs && runs.map(run)));
}
