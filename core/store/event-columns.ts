/**
 * The events table's columns: the one list the migrations' DDL, the agent's
 * INSERT, the daemon's SELECT and the EventRow types are all made from.
 * Per-type columns name the record types that fill them (NULL for the
 * others); `since` is the schema version that added the column, so the v1
 * CREATE TABLE and the later ALTERs come from here too.
 * test/unit/event-columns.test.ts checks a migrated store against it.
 */
import { RecordType, SYSCALL_RECORD_TYPES, type RecordTypeValue } from '../model/record-layout';

/** The store schema version that added write targets. */
export const TARGETS_SCHEMA_VERSION = 2;

/** The store schema version that added the key of the request a send started (request_key). */
export const REQUEST_KEY_SCHEMA_VERSION = 7;

/** The store schema version that added containers and each event's container. */
export const CONTAINERS_SCHEMA_VERSION = 9;

/** The store schema version that added sys_read, sys_fsync, sys_connect and reads' response_ns. */
export const SYSCALL_TYPES_SCHEMA_VERSION = 6;

const BLOCK_IO = [RecordType.BlockIo] as const;
const SYS_READ = [RecordType.SysRead] as const;
const SYS_WRITE = [RecordType.SysWrite] as const;

export interface EventColumn {
  name: string;
  /** filled for every event, or only by events of these record types */
  of: 'all' | readonly RecordTypeValue[];
  nullable: boolean;
  /** the schema version that added it */
  since: number;
}

export const EVENT_COLUMN_TABLE = [
  { name: 'ts', of: 'all', nullable: false, since: 1 },
  { name: 'seq', of: 'all', nullable: false, since: 1 },
  { name: 'type', of: 'all', nullable: false, since: 1 },
  { name: 'dur', of: 'all', nullable: false, since: 1 },
  { name: 'service', of: 'all', nullable: false, since: 1 },
  { name: 'ctx', of: 'all', nullable: true, since: 1 },
  { name: 'pid', of: 'all', nullable: false, since: 1 },
  { name: 'tid', of: 'all', nullable: false, since: 1 },
  { name: 'comm', of: 'all', nullable: false, since: 1 },
  { name: 'bytes', of: 'all', nullable: false, since: 1 },
  { name: 'fd', of: SYSCALL_RECORD_TYPES, nullable: true, since: 1 },
  { name: 'ret', of: SYSCALL_RECORD_TYPES, nullable: true, since: 1 },
  { name: 'syscall', of: SYSCALL_RECORD_TYPES, nullable: true, since: 1 },
  { name: 'dev', of: BLOCK_IO, nullable: true, since: 1 },
  { name: 'sector', of: BLOCK_IO, nullable: true, since: 1 },
  { name: 'op', of: BLOCK_IO, nullable: true, since: 1 },
  { name: 'error', of: BLOCK_IO, nullable: true, since: 1 },
  { name: 'target', of: SYSCALL_RECORD_TYPES, nullable: true, since: TARGETS_SCHEMA_VERSION },
  { name: 'response_ns', of: SYS_READ, nullable: true, since: SYSCALL_TYPES_SCHEMA_VERSION },
  { name: 'request_key', of: SYS_WRITE, nullable: true, since: REQUEST_KEY_SCHEMA_VERSION },
  { name: 'container', of: 'all', nullable: true, since: CONTAINERS_SCHEMA_VERSION },
] as const satisfies readonly EventColumn[];

type Columns = typeof EVENT_COLUMN_TABLE;
type Value<C> = C extends { nullable: true } ? bigint | null : bigint;
type ValuesOf<T extends readonly unknown[]> = { -readonly [I in keyof T]: Value<T[I]> };

/** A row of EVENT_COLUMNS read with safeIntegers(true). */
export type EventRow = { [C in Columns[number] as C['name']]: Value<C> };

/** The same row read in raw mode: its values in EVENT_COLUMNS order. */
export type RawEventRow = ValuesOf<Columns>;

export type EventColumnName = Columns[number]['name'];

/** Columns of the events table, in the order EventRow names them. */
export const EVENT_COLUMNS = EVENT_COLUMN_TABLE.map((c) => c.name).join(', ');

/** The columns every event fills (`all`), or those only events of one type fill, in table order. */
export function columnsOf(of: 'all' | RecordTypeValue): EventColumnName[] {
  return EVENT_COLUMN_TABLE.filter((c) =>
    c.of === 'all' ? of === 'all' : of !== 'all' && (c.of as readonly number[]).includes(of),
  ).map((c) => c.name);
}

/** EVENT_COLUMNS as a store of `schemaVersion` can select them: NULL for a column it does not have yet. */
export function eventColumnsOf(schemaVersion: number): string {
  return EVENT_COLUMN_TABLE.map((c) => (c.since <= schemaVersion ? c.name : `NULL AS ${c.name}`)).join(', ');
}

function definition(c: EventColumn): string {
  return `${c.name} INTEGER${c.nullable ? '' : ' NOT NULL'}`;
}

/** The column definitions of the v1 CREATE TABLE events. */
export function eventColumnsDdl(): string {
  return EVENT_COLUMN_TABLE.filter((c) => c.since === 1)
    .map(definition)
    .join(',\n    ');
}

/** The ALTERs that add the columns of schema `version` (> 1). */
export function eventColumnsAddedIn(version: number): string {
  return EVENT_COLUMN_TABLE.filter((c) => c.since === version)
    .map((c) => `ALTER TABLE events ADD COLUMN ${definition(c)};`)
    .join('\n  ');
}
