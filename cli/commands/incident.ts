/** `kreplay incident show FILE`: what an incident file holds, without a daemon. */
import type { Command } from 'commander';
import {
  incidentCauses,
  readIncidentFile,
  type Incident,
  type IncidentCause,
  type IncidentRun,
} from '../../core/incident';
import { exactJson } from '../../core/json/exact-json';
import { formatNs, percentile } from '../exec/exec-report';
import { formatTable } from '../text-table';

interface TargetRow {
  target: string;
  kind: string;
  calls: number;
  p50: bigint | null;
  p99: bigint | null;
}

/** A cause as shown: the marked call with its target. */
export interface CauseRow extends IncidentCause {
  event_type: string;
  target: string;
  pid: number | null;
}

export interface IncidentSummary {
  file: string;
  header: Incident['header'];
  /** the calls that made the transaction slow or fail, longest wait first */
  causes: CauseRow[];
  /** false: the file predates cause marking and they were computed on reading, by today's rule */
  causes_marked: boolean;
  by_type: Record<string, number>;
  /** each (kind, target) called, most calls first; block requests count per device */
  targets: TargetRow[];
  /** null: the source kept no runs */
  runs: IncidentRun[] | null;
  /** counters that grew over the window and name a loss */
  lost: Record<string, number> | null;
}

/** Counter names that count events the recording did not keep (agent/status.ts names them so). */
const LOSS = /dropped|_full$|corrupt|unknown_/;

export function summarize(file: string, incident: Incident): IncidentSummary {
  const byType: Record<string, number> = {};
  const durations = new Map<string, { target: string; kind: string; ns: bigint[] }>();
  for (const e of incident.events) {
    byType[e.event_type] = (byType[e.event_type] ?? 0) + 1;
    const fields = e as unknown as Record<string, unknown>;
    const [kind, target] =
      typeof fields.device === 'string'
        ? ['block', fields.device]
        : [String(fields.target_kind ?? '-'), String(fields.target ?? '(unknown)')];
    const key = `${kind}\0${target}`;
    let entry = durations.get(key);
    if (!entry) durations.set(key, (entry = { target, kind, ns: [] }));
    entry.ns.push(e.duration_ns);
  }
  const targets = [...durations.values()]
    .map((t) => ({
      target: t.target,
      kind: t.kind,
      calls: t.ns.length,
      p50: percentile(t.ns, 50),
      p99: percentile(t.ns, 99),
    }))
    .sort((a, b) => b.calls - a.calls || (a.target < b.target ? -1 : 1));
  let lost: Record<string, number> | null = null;
  if (incident.runs) {
    lost = {};
    for (const run of incident.runs)
      for (const [name, value] of Object.entries(run.counters))
        if (LOSS.test(name) && value > 0) lost[name] = (lost[name] ?? 0) + value;
  }
  const marked = incident.header.causes;
  const causes = (marked ?? incidentCauses(incident.events)).map((c): CauseRow => {
    const e = incident.events[c.index] as unknown as Record<string, unknown> | undefined;
    return {
      ...c,
      event_type: String(e?.event_type ?? '?'),
      target: String(e?.target ?? e?.device ?? '(unknown)'),
      pid: typeof e?.pid === 'number' ? e.pid : null,
    };
  });
  return {
    file,
    header: incident.header,
    causes,
    causes_marked: marked !== null,
    by_type: byType,
    targets,
    runs: incident.runs,
    lost,
  };
}

const time = (ns: bigint | null) =>
  ns === null
    ? '-'
    : new Date(Number(ns / 1_000_000n))
        .toISOString()
        .replace('Z', `${String(ns % 1_000_000n).padStart(6, '0')}Z`);

function completeness(s: IncidentSummary): string[] {
  if (s.runs === null) return ['unknown: exported from ClickHouse, which keeps no recording runs'];
  if (s.runs.length === 0) return ['unknown: no recording run of its stores overlaps the incident'];
  const lines = s.runs.map((r) => {
    const sampling =
      r.sample_background > 1 ? `, kept 1 in ${r.sample_background} writes without a transaction` : '';
    const filter = r.filter === null ? '' : `, filter ${JSON.stringify(r.filter)}`;
    return `run on ${r.node} (store ${r.store_id}): kernel ${r.kernel}, agent ${r.agent_version}, clock error ±${formatNs(r.clock_error_ns)}${sampling}${filter}`;
  });
  const lost = Object.entries(s.lost ?? {});
  lines.push(
    lost.length === 0
      ? 'nothing lost over the window (counters checked)'
      : `LOST over the window: ${lost.map(([name, n]) => `${name} ${n}`).join(', ')}`,
  );
  return lines;
}

const CAUSE_WORDS: Record<IncidentCause['cause'], string> = {
  response: 'waited for the response',
  duration: 'took',
  error: 'failed',
};

function causeLines(s: IncidentSummary): string[] {
  const head = `CAUSES${s.causes_marked ? '' : ' (computed on reading: the file predates cause marking)'}`;
  if (s.causes.length === 0)
    return [`${head}: none (no wait of 10% of the span and 1 ms or more, no failure)`, ''];
  return [
    `${head}: what made the transaction slow or fail`,
    formatTable(
      s.causes.map((c) => [
        `#${c.index}`,
        c.event_type,
        c.target,
        c.pid ?? '-',
        c.cause === 'error'
          ? `failed ${c.errno} after ${formatNs(c.wait_ns)}`
          : `${CAUSE_WORDS[c.cause]} ${formatNs(c.wait_ns)}`,
      ]),
      ['EVENT', 'TYPE', 'TARGET', 'PID', 'WAIT'],
    ),
    '',
  ];
}

export function formatSummary(s: IncidentSummary): string {
  const h = s.header;
  const span = h.first_ns !== null && h.end_ns !== null ? h.end_ns - h.first_ns : null;
  const types = Object.entries(s.by_type)
    .map(([type, n]) => `${type} ${n}`)
    .join(', ');
  const lines = [
    `incident ${s.file}`,
    ...causeLines(s),
    `  transaction  ${h.transaction_id}`,
    `  file         format ${h.format_version}, ${h.digest}, exported ${h.exported_at} by kreplay ${h.kreplay_version} from ${h.source}`,
    `  span         ${time(h.first_ns)} .. ${time(h.end_ns)} (${formatNs(span)})`,
    `  events       ${h.events}: ${types || 'none'}`,
    `  redaction    ${h.redacted.length ? `${h.redacted.join(', ')} replaced by tokens` : 'none'}`,
    ...completeness(s).map((line, i) => `  ${i === 0 ? 'completeness' : '            '} ${line}`),
    '',
    formatTable(
      s.targets.map((t) => [t.target, t.kind, t.calls, formatNs(t.p50), formatNs(t.p99)]),
      ['TARGET', 'KIND', 'CALLS', 'P50', 'P99'],
    ),
  ];
  return `${lines.join('\n')}\n`;
}

export function registerIncidentCommand(program: Command): void {
  const incident = program.command('incident').description('incident files (docs/query.md "Incident files")');
  incident
    .command('show')
    .description(
      'summarize an incident file: events per type, targets with p50/p99, span, completeness, redaction',
    )
    .argument('<file>', 'an incident file (.kri)')
    .option('--json', 'the summary as JSON', false)
    .action(async (file: string, flags: { json: boolean }) => {
      const summary = summarize(file, await readIncidentFile(file));
      process.stdout.write(flags.json ? `${exactJson(summary)}\n` : formatSummary(summary));
    });
}
