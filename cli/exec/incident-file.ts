/**
 * Reading an incident file for the replay. INTERIM: until core/incident (the
 * incident file format, contract 2) is on main, this reads the same content
 * as plain JSON (`{header, runs, events}`, 64-bit integers as strings); its
 * body then becomes a call of core/incident's readIncidentFile.
 */
import fs from 'node:fs';

export interface IncidentRunInfo {
  node: string;
  counters: Record<string, number>;
}

export interface IncidentContent {
  header: { transaction_id: string; digest: string };
  runs: IncidentRunInfo[] | null;
  events: Record<string, unknown>[];
}

export async function readIncident(file: string): Promise<IncidentContent> {
  let text: string;
  try {
    text = await fs.promises.readFile(file, 'utf8');
  } catch (err) {
    throw new Error(`${file}: cannot read the incident file: ${(err as Error).message}`, { cause: err });
  }
  let content: IncidentContent;
  try {
    content = JSON.parse(text) as IncidentContent;
  } catch {
    throw new Error(`${file}: not an incident file`);
  }
  for (const event of content.events) {
    event.timestamp_ns = BigInt(event.timestamp_ns as string);
    event.duration_ns = BigInt(event.duration_ns as string);
  }
  return content;
}
