import Database from 'better-sqlite3';
import { EVENT_TYPES } from '../../core/model';
import { EVENT_COLUMNS } from '../../core/store/event-columns';
import { SLOW_EVENT_NS } from '../../core/store/schema';
import { storePath } from '../../agent/store/store-writer';
import type { EventFilter } from '../../daemon/store/event-filter';
import { rangeFor } from '../../daemon/store/key-range';
import { NodeStore, toEventRow } from '../../daemon/store/node-store';
import { eventsSql, rangeParams, summarySql } from '../../daemon/store/query-sql';
import { writeStore } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir();
const BASE = 1795345678123456789n;
const RANGE = '(ts,seq)>(?,?) AND (ts,seq)<(?,?)';

describe('event reads use the index that serves them, already in (ts, seq) order', () => {
  it.each<[string, EventFilter, string]>([
    [
      'transaction',
      { transactionId: 't1' },
      `SEARCH events USING INDEX events_by_context (ctx=? AND ${RANGE})`,
    ],
    [
      'trace + everything else',
      {
        traceId: 'tr',
        service: 'api',
        types: ['block_io'],
        minDurationNs: 5n,
        fromNs: BASE,
        toNs: BASE + 9n,
      },
      `SEARCH events USING INDEX events_by_context (ctx=? AND ${RANGE})`,
    ],
    [
      'service + time window',
      { service: 'api', fromNs: BASE, toNs: BASE + 9n, types: ['sys_write'] },
      `SEARCH events USING INDEX events_by_service (service=? AND ${RANGE})`,
    ],
    [
      'type + slow minimum',
      { types: ['block_io'], minDurationNs: BigInt(SLOW_EVENT_NS) },
      `SEARCH events USING INDEX events_slow (type=? AND ${RANGE})`,
    ],
    [
      'fast minimum',
      { minDurationNs: BigInt(SLOW_EVENT_NS - 1) },
      `SEARCH events USING PRIMARY KEY (${RANGE})`,
    ],
    ['type only', { types: ['block_io'] }, `SEARCH events USING PRIMARY KEY (${RANGE})`],
    ['nothing', {}, `SEARCH events USING PRIMARY KEY (${RANGE})`],
  ])('%s', (_name, filter, plan) => {
    writeStore(dir.path, 'n', [
      { ts: BASE, txn: 't1', trace: 'tr', service: 'api', type: 'block_io', dur: SLOW_EVENT_NS },
      { ts: BASE + 1n, txn: 't2', trace: 'tr', service: 'api' },
    ]);
    const store = NodeStore.open(storePath(dir.path, 'n'));
    const db = new Database(storePath(dir.path, 'n'), { readonly: true });
    try {
      const reads = store.reads(filter);
      expect(reads.length).toBeGreaterThan(0);
      for (const read of reads) {
        const params = { ...read.params, ...rangeParams(rangeFor(filter, store.info.storeId, 'asc')) };
        for (const sql of [eventsSql(read.shape, 'asc'), eventsSql(read.shape, 'desc')]) {
          const details = (
            db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all({ ...params, limit: 10 }) as { detail: string }[]
          ).map((r) => r.detail);
          expect(details).toEqual([plan]);
        }
        const summary = db.prepare(`EXPLAIN QUERY PLAN ${summarySql(read.shape)}`).all(params) as {
          detail: string;
        }[];
        expect(summary.map((r) => r.detail).join()).not.toMatch(/TEMP B-TREE|SCAN/);
      }
    } finally {
      db.close();
      store.close();
    }
  });

  it.each<[string, EventFilter, string, string]>([
    [
      'exact target within a transaction',
      { transactionId: 't1', target: { value: '/a', prefix: false } },
      `SEARCH events USING INDEX events_by_context (ctx=? AND ${RANGE})`,
      'SEARCH targets USING COVERING INDEX targets_by_value (value=?)',
    ],
    [
      'target prefix and kinds over time',
      { target: { value: '/a', prefix: true }, targetKinds: ['file', 'char'] },
      `SEARCH events USING PRIMARY KEY (${RANGE})`,
      'SEARCH targets USING COVERING INDEX targets_by_value (value>? AND value<?)',
    ],
  ])('%s: the index above, the targets dictionary searched once by value', (_name, filter, plan, lookup) => {
    writeStore(dir.path, 'n', [{ ts: BASE, txn: 't1', target: ['file', '/a/b'] }]);
    const store = NodeStore.open(storePath(dir.path, 'n'));
    const db = new Database(storePath(dir.path, 'n'), { readonly: true });
    try {
      const [read] = store.reads(filter);
      const params = {
        ...read!.params,
        ...rangeParams(rangeFor(filter, store.info.storeId, 'asc')),
        limit: 10,
      };
      const details = (
        db.prepare(`EXPLAIN QUERY PLAN ${eventsSql(read!.shape, 'asc')}`).all(params) as {
          detail: string;
        }[]
      ).map((r) => r.detail);
      expect(details).toEqual([plan, 'LIST SUBQUERY 1', lookup, 'CREATE BLOOM FILTER']);
    } finally {
      db.close();
      store.close();
    }
  });

  it('reads one context at a time: a trace spanning transactions is a merge, not an IN list', () => {
    writeStore(dir.path, 'n', [
      { ts: BASE, txn: 'a', trace: 'tr' },
      { ts: BASE + 1n, txn: 'b', trace: 'tr' },
      { ts: BASE + 2n, txn: 'c', trace: 'other' },
    ]);
    const store = NodeStore.open(storePath(dir.path, 'n'));
    try {
      expect(store.reads({ traceId: 'tr' })).toHaveLength(2);
      expect(store.reads({ traceId: 'tr', transactionId: 'b' })).toHaveLength(1);
      expect(store.reads({ traceId: 'missing' })).toEqual([]);
      expect(store.reads({ service: 'missing' })).toEqual([]);
      expect(store.reads({ node: 'elsewhere' })).toEqual([]);
      // the slow index is keyed by type: one read per event type
      expect(store.reads({ minDurationNs: BigInt(SLOW_EVENT_NS) })).toHaveLength(EVENT_TYPES.length);
    } finally {
      store.close();
    }
  });
});

describe('toEventRow', () => {
  it('names the raw values in EVENT_COLUMNS order', () => {
    const columns = EVENT_COLUMNS.split(', ');
    const row = toEventRow(columns);
    expect(Object.keys(row)).toEqual(columns);
    expect(Object.values(row)).toEqual(columns);
  });
});
