/** Prints rows as an aligned text table. */
export function printTable(title: string, rows: (string | number)[][], header?: string[]): void {
  const all = header ? [header, ...rows] : rows;
  const widths = all[0]!.map((_, c) => Math.max(...all.map((r) => String(r[c] ?? '').length)));
  const line = (r: (string | number)[]) =>
    '| ' + r.map((v, c) => String(v).padEnd(widths[c]!)).join(' | ') + ' |';
  console.log(`\n${title}`);
  if (header) {
    console.log(line(header));
    console.log('|' + widths.map((w) => '-'.repeat(w + 2)).join('|') + '|');
  }
  for (const r of rows) console.log(line(r));
}
