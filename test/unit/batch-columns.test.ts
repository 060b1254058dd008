/**
 * The batch's columns are listed once (agent/ingest/batch-columns.ts): kreplay_batch's C table
 * (native/sqlite/kreplay_batch.c) is compiled and printed here, and must be the same list in the
 * same order with the same kinds; EventBatch's arrays and the INSERT's arguments come from the list.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { BATCH_COLUMNS, batchArraysBytes, widthOf } from '../../agent/ingest/batch-columns';
import { EventBatch } from '../../agent/ingest/event-batch';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-batch-columns-');
const ROOT = resolve(__dirname, '..', '..');

/** kColumns of kreplay_batch.c as "name kind" pairs, from the compiled C. */
function cColumns(): string[][] {
  const source = [
    '#include <stdio.h>',
    '#include "kreplay_batch.c"',
    // the other files of the extension, which its entry point registers
    'int kreplay_contexts_register(sqlite3 *db) { (void)db; return 0; }',
    'int kreplay_rowbinary_register(sqlite3 *db) { (void)db; return 0; }',
    'int kreplay_clickhouse_lz4_register(sqlite3 *db) { (void)db; return 0; }',
    'int kreplay_otlp_register(sqlite3 *db) { (void)db; return 0; }',
    'static const char *kindName(Kind k) {',
    '  switch (k) { case F64: return "F64"; case U32: return "U32"; case I32: return "I32"; case ID: return "ID"; case NS: return "NS"; }',
    '  return "?";',
    '}',
    'int main(void) {',
    '  for (int i = 0; i < N_DATA; i++) printf("%s %s\\n", kColumns[i].name, kindName(kColumns[i].kind));',
    '  return 0;',
    '}',
  ].join('\n');
  writeFileSync(join(dir.path, 'columns.c'), source);
  const exe = join(dir.path, 'columns');
  execFileSync('gcc', [
    '-Wall',
    '-Werror',
    '-I',
    join(ROOT, 'native', 'sqlite'),
    '-I',
    join(ROOT, 'node_modules', 'better-sqlite3', 'deps', 'sqlite3'),
    '-o',
    exe,
    join(dir.path, 'columns.c'),
    '-lm',
  ]);
  return execFileSync(exe, { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((line) => line.split(' '));
}

describe('batch columns', () => {
  it("are kreplay_batch's C columns, name for name and kind for kind, in its order", () => {
    expect(cColumns()).toEqual(BATCH_COLUMNS.map((c) => [c.sql, c.kind]));
  });

  it("give EventBatch a typed array per column over the batch's memory, none overlapping", () => {
    const capacity = 5;
    const batch = new EventBatch(capacity);
    const spans = BATCH_COLUMNS.map(({ field, kind }) => {
      const array = batch[field];
      expect(array.length).toBe(capacity);
      expect(array.BYTES_PER_ELEMENT).toBe(widthOf(kind));
      expect(array.buffer).toBe(batch.memory);
      return [array.byteOffset, array.byteOffset + array.byteLength] as const;
    });
    spans.push([batch.type.byteOffset, batch.type.byteOffset + batch.type.byteLength]);
    const sorted = [...spans].sort((a, b) => a[0] - b[0]);
    sorted.slice(1).forEach(([start], i) => expect(start).toBeGreaterThanOrEqual(sorted[i]![1]));
    expect(sorted.at(-1)![1]).toBeLessThanOrEqual(EventBatch.bytesFor(capacity));
    expect(batchArraysBytes(capacity)).toBeLessThan(EventBatch.bytesFor(capacity));
  });
});
