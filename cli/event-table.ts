/** Events as fixed-width text rows, for people reading `kreplay events`. */
import type { ApiEvent } from '../core/model';
import { formatTimeNs } from '../daemon/http/query-values';

const COLUMNS: [title: string, width: number][] = [
  ['TIME (UTC)', 30],
  ['NODE', 12],
  ['TYPE', 9],
  ['DURATION', 14],
  ['SERVICE', 16],
  ['TRANSACTION', 16],
  ['TRACE', 16],
  ['PID', 7],
  ['COMM', 15],
  ['DETAIL', 0],
];

/** Exact milliseconds: 250000 ns -> "0.25 ms". */
function formatDurationNs(ns: bigint): string {
  const fraction = (ns % 1_000_000n).toString().padStart(6, '0').replace(/0+$/, '');
  return `${ns / 1_000_000n}${fraction ? `.${fraction}` : ''} ms`;
}

function detail(e: ApiEvent): string {
  return e.event_type === 'block_io'
    ? `${e.op} dev=${e.device} sector=${e.sector} bytes=${e.bytes} error=${e.error}`
    : `${e.syscall} fd=${e.fd} bytes=${e.bytes} ret=${e.ret}${e.target === null ? '' : ` -> ${e.target}`}`;
}

function line(cells: string[]): string {
  return (
    cells
      .map((cell, i) => cell.padEnd(COLUMNS[i]![1]))
      .join(' ')
      .trimEnd() + '\n'
  );
}

export function tableHeader(): string {
  return line(COLUMNS.map(([title]) => title));
}

export function tableRow(e: ApiEvent): string {
  return line([
    formatTimeNs(e.timestamp_ns),
    e.node,
    e.event_type,
    formatDurationNs(e.duration_ns),
    e.service_name,
    e.transaction_id ?? '-',
    e.trace_id ?? '-',
    String(e.pid),
    e.comm,
    detail(e),
  ]);
}
