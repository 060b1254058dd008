/**
 * The EventBatch's data columns, the one list: in kreplay_batch's argument
 * order (native/sqlite/kreplay_batch.c's kColumns, which
 * test/unit/batch-columns.test.ts compiles and compares), each with the name
 * kreplay_batch gives it and its element kind. EventBatch lays out its typed
 * arrays from it, and the store's INSERT binds them in this order.
 *
 * Kinds, as kreplay_batch reads them: F64 a double (whole numbers come back
 * as integers), U32 and I32 integers, ID a u32 id whose 0 means none (NULL),
 * NS a double time whose 0 means none (NULL).
 */
export const BATCH_COLUMNS = [
  { field: 'tsOffset', sql: 'ts_offset', kind: 'F64' },
  { field: 'dur', sql: 'dur', kind: 'F64' },
  { field: 'bytes', sql: 'bytes', kind: 'F64' },
  /** fd for a syscall, dev for block_io */
  { field: 'handle', sql: 'handle', kind: 'F64' },
  /** ret for a syscall, sector for block_io */
  { field: 'result', sql: 'result', kind: 'F64' },
  /**
   * the service's store id plus 2^32 times the container's (0: none): one column for both, as
   * `response` below (exact: container ids stay far below 2^21)
   */
  { field: 'service', sql: 'service', kind: 'F64' },
  /** store context id */
  { field: 'ctx', sql: 'ctx', kind: 'ID' },
  { field: 'pid', sql: 'pid', kind: 'U32' },
  { field: 'tid', sql: 'tid', kind: 'U32' },
  { field: 'comm', sql: 'comm', kind: 'U32' },
  /** syscall for a syscall, op for block_io */
  { field: 'kind', sql: 'kind', kind: 'U32' },
  /** block_io error (negative errno) */
  { field: 'error', sql: 'error', kind: 'I32' },
  /** store target id of a syscall */
  { field: 'target', sql: 'target', kind: 'ID' },
  /**
   * a read's response time; a send's request key (native/capture/request_key.h). One column for both: past
   * 16 arguments SQLite checks kreplay_batch's arguments itself, comparing whole blobs per row (the
   * sixteenth is the picks, agent/store/event-insert.ts: a new column must share one)
   */
  { field: 'response', sql: 'response', kind: 'NS' },
] as const;

/** The largest container id the service column holds exactly beside a service id (2^53 / 2^32 - 1). */
export const MAX_CONTAINER_ID = 2 ** 21 - 1;

/** The service column's value: the service's store id, the container's (0: none, at most MAX_CONTAINER_ID) above 2^32. */
export function serviceColumn(service: number, container: number): number {
  return service + container * 0x1_0000_0000;
}

export type BatchColumn = (typeof BATCH_COLUMNS)[number];
export type BatchKind = BatchColumn['kind'];

type ArrayOf<K extends BatchKind> = K extends 'F64' | 'NS'
  ? Float64Array
  : K extends 'I32'
    ? Int32Array
    : Uint32Array;

/** Each data column's typed array, by field name. */
export type BatchArrays = { [C in BatchColumn as C['field']]: ArrayOf<C['kind']> };

const WIDTHS: Record<BatchKind, number> = { F64: 8, NS: 8, U32: 4, ID: 4, I32: 4 };

/** Bytes one element of `kind` takes. */
export function widthOf(kind: BatchKind): number {
  return WIDTHS[kind];
}

function arrayOf(kind: BatchKind, memory: ArrayBufferLike, offset: number, length: number): ArrayBufferView {
  if (kind === 'F64' || kind === 'NS') return new Float64Array(memory, offset, length);
  return kind === 'I32' ? new Int32Array(memory, offset, length) : new Uint32Array(memory, offset, length);
}

/** A column of `capacity` elements takes its bytes rounded up to 8, so the next column stays aligned. */
export function paddedBytes(width: number, capacity: number): number {
  return Math.ceil((capacity * width) / 8) * 8;
}

/** Typed arrays over `memory` from `offset` for every data column (widest first, so each stays aligned). */
export function batchArrays(memory: ArrayBufferLike, capacity: number, offset = 0): BatchArrays {
  const views: Record<string, ArrayBufferView> = {};
  for (const column of [...BATCH_COLUMNS].sort((a, b) => widthOf(b.kind) - widthOf(a.kind))) {
    views[column.field] = arrayOf(column.kind, memory, offset, capacity);
    offset += paddedBytes(widthOf(column.kind), capacity);
  }
  return views as BatchArrays;
}

/** Bytes the data columns of a batch of `capacity` rows take. */
export function batchArraysBytes(capacity: number): number {
  return BATCH_COLUMNS.reduce((sum, column) => sum + paddedBytes(widthOf(column.kind), capacity), 0);
}
