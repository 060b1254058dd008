/** Prints rows as an aligned text table (and hands it to bench/run.ts's summary, when run by it). */
import { appendFileSync } from 'node:fs';
import { formatTable } from '../cli/text-table';

export function printTable(title: string, rows: (string | number)[][], header?: string[]): void {
  console.log(`\n${title}`);
  console.log(formatTable(rows, header));
  const summary = process.env.KREPLAY_BENCH_TABLES;
  if (summary) appendFileSync(summary, `${JSON.stringify({ title, header, rows })}\n`);
}
