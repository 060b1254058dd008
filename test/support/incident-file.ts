/**
 * Incident files for replay tests. INTERIM: until core/incident (the incident
 * file format) is on main, the content as the interim reader of
 * cli/exec/incident-file.ts reads it; then core/incident's writer.
 */
import { writeFileSync } from 'node:fs';
import { exactJson } from '../../core/json/exact-json';

export interface TestRun {
  node: string;
  counters: Record<string, number>;
}

/** Writes `events` (ApiEvent objects, bigint times) as the incident of their transaction. */
export function writeIncident(
  file: string,
  events: readonly object[],
  runs: TestRun[] | null = [{ node: 'test', counters: {} }],
): void {
  const first = events[0] as { transaction_id: string };
  writeFileSync(
    file,
    exactJson({ header: { transaction_id: first.transaction_id, digest: 'sha256:test' }, runs, events }, true),
  );
}
