/**
 * The SQL that turns a batch of a node file into the bytes of a ClickHouse
 * `INSERT … FORMAT RowBinary`: one aggregate (kreplay_rowbinary,
 * native/sqlite/kreplay_rowbinary.c) over the batch's rows, each ClickHouse
 * column given by a SQLite expression over the node file's row and its
 * dictionaries. The columns and their types come from
 * CLICKHOUSE_EVENT_COLUMNS (core/clickhouse/schema.ts); each value is the one
 * rowToEvent (core/model/event.ts) gives the API, names built from the same
 * tables (test/integration/clickhouse-rowbinary.test.ts compares every field).
 * A ClickHouse column named like a column of the node file's events table
 * (core/store/event-columns.ts) is that column as it is: a column added to
 * both needs nothing here.
 */
import { CLICKHOUSE_EVENT_COLUMNS, type ClickHouseColumn } from '../../core/clickhouse/schema';
import type { InsertCodec } from '../../core/clickhouse/http-client';
import {
  BLOCK_OP_CODES,
  blockOpName,
  eventTypeName,
  RecordType,
  SYSCALL_NAMES,
  TARGET_KINDS,
  targetKindName,
} from '../../core/model';
import { EVENT_COLUMN_TABLE } from '../../core/store/event-columns';

/** The newest seq the node file holds: the loop's backlog and the owner's lag read it on their own connections. */
export const LAST_SEQ_SQL = 'SELECT max(seq) FROM events';

/**
 * The batch: the rows of a seq range (not `LIMIT n`, whose subquery would copy every row once more
 * before the aggregate) beside their dictionaries' strings.
 */
const FROM_SQL = `
  FROM events e INDEXED BY events_by_seq
  JOIN services s ON s.id = e.service
  JOIN comms m ON m.id = e.comm
  LEFT JOIN contexts c ON c.id = e.ctx
  LEFT JOIN targets t ON t.id = e.target
  LEFT JOIN containers k ON k.id = e.container
  WHERE e.seq >= @from AND e.seq < @to`;

/** A SQLite string literal. */
const text = (value: string) => `'${value.replaceAll("'", "''")}'`;

/** `CASE value WHEN code THEN 'name' … ELSE fallback END` for a code → name table. */
function names(
  value: string,
  codes: Iterable<number>,
  name: (code: number) => string,
  fallback: string,
): string {
  const whens = [...codes].map((code) => `WHEN ${code} THEN ${text(name(code))}`).join(' ');
  return `CASE ${value} ${whens} ELSE ${fallback} END`;
}

const isBlock = `e.type = ${RecordType.BlockIo}`;
/** a value only events of the other (syscall) types carry, as rowToEvent gives it */
const ofSyscalls = (sql: string) => `CASE WHEN ${isBlock} THEN NULL ELSE ${sql} END`;
const ofBlock = (sql: string) => `CASE WHEN ${isBlock} THEN ${sql} END`;
const eventTypes = Object.values(RecordType).filter(
  (code) => code !== RecordType.Context && code !== RecordType.Target,
);

/** The ClickHouse columns whose value is not a node-file column of that name. */
const DERIVED: Record<string, string> = {
  // formatEventId, natively (native/sqlite/kreplay_rowbinary.c)
  event_id: 'kreplay_event_id(@store_id, e.ts, e.seq)',
  store_id: '@store_id',
  timestamp_ns: 'e.ts',
  event_type: names('e.type', eventTypes, eventTypeName, text(eventTypeName(0))),
  duration_ns: 'e.dur',
  service_name: 's.name',
  transaction_id: 'c.transaction_id',
  trace_id: 'c.trace_id',
  node: '@node',
  comm: 'm.name',
  syscall: ofSyscalls(
    names(
      'coalesce(e.syscall, 0)',
      SYSCALL_NAMES.keys(),
      (c) => SYSCALL_NAMES[c]!,
      `'syscall_' || e.syscall`,
    ),
  ),
  fd: ofSyscalls('coalesce(e.fd, -1)'),
  ret: ofSyscalls('coalesce(e.ret, 0)'),
  target_kind: names(
    't.kind',
    TARGET_KINDS.map((_, i) => i + 1),
    targetKindName,
    `CASE WHEN t.kind IS NULL THEN NULL ELSE ${text(targetKindName(0))} END`,
  ),
  target: 't.value',
  // deviceName: major:minor of MKDEV()
  device: ofBlock(`(coalesce(e.dev, 0) / ${0x100000}) || ':' || (coalesce(e.dev, 0) % ${0x100000})`),
  sector: ofBlock('coalesce(e.sector, 0)'),
  op: ofBlock(names('coalesce(e.op, 0)', BLOCK_OP_CODES, blockOpName, `'op_' || e.op`)),
  error: ofBlock('coalesce(e.error, 0)'),
  container: 'k.info',
  container_id: "k.info ->> '$.id'",
  container_name: "k.info ->> '$.name'",
  container_image: "k.info ->> '$.image'",
  k8s_pod_name: "k.info ->> '$.pod'",
  k8s_namespace_name: "k.info ->> '$.namespace'",
};

const NODE_COLUMNS = new Set<string>(EVENT_COLUMN_TABLE.map((c) => c.name));

function source(column: ClickHouseColumn): string {
  const derived = DERIVED[column.name];
  if (derived !== undefined) return derived;
  if (NODE_COLUMNS.has(column.name)) return `e.${column.name}`;
  throw new Error(
    `ClickHouse column ${column.name} has no value in a node file: name it like a column of core/store/event-columns.ts or derive it in agent/ship/ship-sql.ts`,
  );
}

const INTEGER_WIDTH: Record<string, number> = {
  UInt8: 1,
  Int8: 1,
  UInt16: 2,
  Int16: 2,
  UInt32: 4,
  Int32: 4,
  UInt64: 8,
  Int64: 8,
};

/** The type's token in kreplay_rowbinary's spec: s or an integer width, after n when Nullable. */
export function rowBinaryType(type: string): string {
  const nullable = /^Nullable\((.*)\)$/.exec(type);
  const inner = nullable ? nullable[1]! : type;
  const token = inner === 'String' ? 's' : String(INTEGER_WIDTH[inner] ?? '');
  if (!token) throw new Error(`ClickHouse type ${type} has no RowBinary encoding in kreplay_rowbinary`);
  return (nullable ? 'n' : '') + token;
}

export interface ShipSql {
  /** `INSERT INTO <table> (columns) FORMAT RowBinary` */
  insert(table: string): string;
  /**
   * one row: rowbinary (blob; with `lz4`, in ClickHouse's compressed blocks), count, last_seq
   * (null when none); parameters @store_id, @node, seqs [@from, @to)
   */
  batch: string;
}

export function shipSql(
  columns: readonly ClickHouseColumn[] = CLICKHOUSE_EVENT_COLUMNS,
  codec: InsertCodec = 'none',
): ShipSql {
  const spec = columns.map((c) => rowBinaryType(c.type)).join(' ');
  const names = columns.map((c) => c.name).join(', ');
  const rows = `kreplay_rowbinary(${text(spec)}, ${columns.map(source).join(', ')})`;
  // framed in the same statement: the uncompressed rows never leave SQLite (native/sqlite/kreplay_clickhouse_lz4.c)
  return {
    insert: (table) => `INSERT INTO ${table} (${names}) FORMAT RowBinary`,
    batch: `SELECT ${codec === 'lz4' ? `kreplay_clickhouse_lz4(${rows})` : rows} AS rowbinary,
              count(*) AS count, max(e.seq) AS last_seq ${FROM_SQL}`,
  };
}
