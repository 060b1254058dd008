/** Rows as an aligned text table, header underlined. */
export function formatTable(rows: (string | number)[][], header?: string[]): string {
  const all = header ? [header, ...rows] : rows;
  if (all.length === 0) return '';
  const widths = all[0]!.map((_, c) => Math.max(...all.map((r) => String(r[c] ?? '').length)));
  const line = (r: (string | number)[]) =>
    '| ' + r.map((v, c) => String(v).padEnd(widths[c]!)).join(' | ') + ' |';
  const out: string[] = [];
  if (header) out.push(line(header), '|' + widths.map((w) => '-'.repeat(w + 2)).join('|') + '|');
  for (const r of rows) out.push(line(r));
  return out.join('\n');
}
