/** Prints rows as an aligned text table. */
import { formatTable } from '../cli/text-table';

export function printTable(title: string, rows: (string | number)[][], header?: string[]): void {
  console.log(`\n${title}`);
  console.log(formatTable(rows, header));
}
