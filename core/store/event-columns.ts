/**
 * The events table's columns: the one list the DDL, the agent's INSERT, the
 * daemon's SELECT and the EventRow type are all made from. The per-type
 * columns say which record type fills them (NULL for the other types) and
 * which EventBatch column feeds them. Adding a column here also needs a
 * schema migration (core/store/schema.ts); test/unit/event-columns.test.ts
 * checks that a migrated store has exactly these columns.
 */
import { RecordType, type RecordTypeValue } from '../model/record-layout';

export interface EventColumn {
  name: string;
  /** filled for every event, or only by events of this record type */
  of: 'all' | RecordTypeValue;
  nullable: boolean;
}

export const EVENT_COLUMN_TABLE = [
  { name: 'ts', of: 'all', nullable: false },
  { name: 'seq', of: 'all', nullable: false },
  { name: 'type', of: 'all', nullable: false },
  { name: 'dur', of: 'all', nullable: false },
  { name: 'service', of: 'all', nullable: false },
  { name: 'ctx', of: 'all', nullable: true },
  { name: 'pid', of: 'all', nullable: false },
  { name: 'tid', of: 'all', nullable: false },
  { name: 'comm', of: 'all', nullable: false },
  { name: 'bytes', of: 'all', nullable: false },
  { name: 'fd', of: RecordType.SysWrite, nullable: true },
  { name: 'ret', of: RecordType.SysWrite, nullable: true },
  { name: 'syscall', of: RecordType.SysWrite, nullable: true },
  { name: 'dev', of: RecordType.BlockIo, nullable: true },
  { name: 'sector', of: RecordType.BlockIo, nullable: true },
  { name: 'op', of: RecordType.BlockIo, nullable: true },
  { name: 'error', of: RecordType.BlockIo, nullable: true },
] as const satisfies readonly EventColumn[];

type Columns = typeof EVENT_COLUMN_TABLE;
type Value<C> = C extends { nullable: true } ? bigint | null : bigint;
type ValuesOf<T extends readonly unknown[]> = { -readonly [I in keyof T]: Value<T[I]> };

/** A row of EVENT_COLUMNS read with safeIntegers(true). */
export type EventRow = { [C in Columns[number] as C['name']]: Value<C> };

/** The same row read in raw mode: the values in EVENT_COLUMNS order. */
export type RawEventRow = ValuesOf<Columns>;

export type EventColumnName = Columns[number]['name'];

export const EVENT_COLUMN_NAMES: readonly EventColumnName[] = EVENT_COLUMN_TABLE.map((c) => c.name);

/** Columns of the events table, in the order EventRow names them. */
export const EVENT_COLUMNS = EVENT_COLUMN_NAMES.join(', ');

/** The columns every event fills, then those events of `type` fill. */
export function columnsOf(type: RecordTypeValue | 'all'): EventColumnName[] {
  return EVENT_COLUMN_TABLE.filter((c) => c.of === type).map((c) => c.name);
}

/** The column definitions of CREATE TABLE events. */
export function eventColumnsDdl(): string {
  return EVENT_COLUMN_TABLE.map((c) => `${c.name} INTEGER${c.nullable ? '' : ' NOT NULL'}`).join(',\n    ');
}
