/**
 * Retention in two tiers, because incidents are replayed from transactions:
 * background events (no context) are kept for `retainNs`, events with a
 * transaction or trace context for `retainContextNs`, and past the size cap
 * the oldest go first, background before context. Deletion runs in steps of
 * at most STEP_ROWS rows, each its own transaction with a `pruned` row that
 * says what went, so a reader can tell a pruned range from a quiet one.
 *
 * Events not yet shipped to a fleet store (agent/ship) outlive both retention
 * times: only the cap removes them, and a step says how many it took.
 *
 * The file stays under the cap by reuse: a DELETE frees whole pages at the
 * old end of the time-clustered table and the next inserts take them, so the
 * file grows only while the pages in use do (auto_vacuum stays NONE; see
 * bench/RESULTS.md, Issue 14, for the comparison with INCREMENTAL).
 */
import type Database from 'better-sqlite3';
import { statfsSync } from 'node:fs';
import { firstUnshippedSeq } from '../../core/store/schema';
import { DEFAULT_CHECKPOINT_POLICY, type CheckpointPolicyOptions } from './checkpoint-policy';
import type { ContextEntry } from '../ingest/dictionary';

export interface RetentionPolicy {
  /** events without a context older than this go, ns (0: keep forever) */
  retainNs: number;
  /** events with a transaction or trace context older than this go, ns (0: keep forever) */
  retainContextNs: number;
  /** bytes of the store file and its WAL (0: no cap) */
  maxStoreBytes: number;
}

/** The cap as given: bytes, or a share of the data dir's filesystem (resolved once the dir exists). */
export type StoreCap = { bytes: number } | { share: number };

export interface RetentionOptions {
  retainNs: number;
  retainContextNs: number;
  maxStore: StoreCap;
}

export const DEFAULT_RETAIN_NS = 6 * 3600 * 1e9;
export const DEFAULT_RETAIN_CONTEXT_NS = 7 * 86400 * 1e9;
/** share of the data dir's filesystem the store may use unless told otherwise */
export const DEFAULT_MAX_STORE_SHARE = 0.1;

/** Rows per step: one step is a short transaction between two ingest batches. */
export const STEP_ROWS = 50_000;
/* Most rows one run removes, even over the cap: the rest waits for the next batch rather than stall ingest. */
const MAX_RUN_ROWS = 4 * STEP_ROWS;
/* Past HIGH_WATER of the cap pruning starts, and goes on until the store is down to LOW_WATER. */
const HIGH_WATER = 0.9;
const LOW_WATER = 0.8;
/* Rows per step under the cap are sized from the excess at this many bytes a row (rows take less, so steps undershoot and repeat). */
const CAP_BYTES_PER_ROW = 256;
const CAP_MIN_STEP_ROWS = 1000;
/**
 * The cap's bound on ts: none. It takes the oldest whenever they were stamped; bounded by the
 * prune's now, a wall clock stepped back left every newer event out of reach and the store grew
 * past the cap until the clock caught up.
 */
const ANY_TS = (1n << 63n) - 1n;

export function resolvePolicy(dataDir: string, options: RetentionOptions): RetentionPolicy {
  let maxStoreBytes: number;
  if ('bytes' in options.maxStore) maxStoreBytes = options.maxStore.bytes;
  else {
    const fs = statfsSync(dataDir);
    maxStoreBytes = Math.floor(fs.blocks * fs.bsize * options.maxStore.share);
  }
  return { retainNs: options.retainNs, retainContextNs: options.retainContextNs, maxStoreBytes };
}

/**
 * A WAL that fits under the cap: checkpoints come sooner for a small store.
 * The WAL reaches about passiveBytes plus one transaction before it restarts.
 */
export function checkpointPolicyFor(policy: RetentionPolicy): CheckpointPolicyOptions {
  if (policy.maxStoreBytes === 0) return DEFAULT_CHECKPOINT_POLICY;
  const mib = 1024 * 1024;
  return {
    ...DEFAULT_CHECKPOINT_POLICY,
    passiveBytes: Math.min(DEFAULT_CHECKPOINT_POLICY.passiveBytes, Math.max(mib, policy.maxStoreBytes / 8)),
    restartBytes: Math.min(
      DEFAULT_CHECKPOINT_POLICY.restartBytes,
      Math.max(2 * mib, policy.maxStoreBytes / 4),
    ),
  };
}

/**
 * WAL room kept under the cap: the WAL restarts once past restartBytes, so it
 * peaks there plus the transaction that crossed it (about an eighth of the cap,
 * see transactionRowsFor).
 */
export function walAllowanceFor(policy: RetentionPolicy, checkpoint: CheckpointPolicyOptions): number {
  return checkpoint.restartBytes + policy.maxStoreBytes / 8;
}

/* WAL bytes one inserted row takes (its table and index pages, measured about 180) */
const WAL_BYTES_PER_ROW = 256;
const MIN_TRANSACTION_ROWS = 4096;

/** Rows per transaction so that one transaction's WAL is about an eighth of the cap. */
export function transactionRowsFor(policy: RetentionPolicy): number {
  if (policy.maxStoreBytes === 0) return Number.POSITIVE_INFINITY;
  return Math.max(MIN_TRANSACTION_ROWS, Math.floor(policy.maxStoreBytes / 8 / WAL_BYTES_PER_ROW));
}

type Tier = 'background' | 'context';
export type PruneReason = 'retain' | 'retain-context' | 'max-store-bytes';

export interface PruneStep {
  reason: PruneReason;
  fromNs: bigint;
  toNs: bigint;
  background: number;
  context: number;
  /** of the events removed, those not yet shipped (only the cap removes them) */
  unshipped: number;
  /** contexts no event refers to any more, removed with their last events */
  forgotten: ContextEntry[];
}

const TIER_WHERE: Record<Tier, string> = {
  background: 'ctx IS NULL',
  context: 'ctx IS NOT NULL',
};

interface TierStatements {
  /** ts of the n-th oldest row of the tier at or after a floor and before a cutoff */
  nth: Database.Statement<[bigint, bigint, number], bigint | null>;
  first: Database.Statement<[bigint, bigint], bigint | null>;
  last: Database.Statement<[bigint, bigint], bigint | null>;
  remove: Database.Statement<[bigint, bigint, bigint]>;
  /** rows of a remove's range at or past a seq: the unshipped ones it takes */
  countFromSeq: Database.Statement<[bigint, bigint, bigint, number], number>;
}

type OrphanContext = [string | null, string | null, string | null, number | null];

/* The targets column of each tier's latest event that used a target (core/store/schema.ts, v12). */
const TARGET_LAST: Record<Tier, string> = {
  background: 'last_background_ns',
  context: 'last_context_ns',
};

/**
 * A step that removes a tier's events from ts `from` to `to` takes every one of that tier at or
 * before `to`: a target one of them used whose latest event of the tier is at or before `to` has
 * none of it left. It goes when the other tier has none either; else it keeps only the other
 * tier's. Run before the events go, on the targets their rows name: no index on the stamps, which
 * cost the writer ~1.6 µs an event where each is a new file.
 */
interface TargetRange {
  from: bigint;
  to: bigint;
  before: bigint;
}
interface TargetCleanup {
  release: Database.Statement<[TargetRange], [number, number]>;
  remove: Database.Statement<[number]>;
}

/** Context tier deletes say which contexts they touched, to remove those left without events. */
interface ContextCleanup {
  removeReturning: Database.Statement<[bigint, bigint, bigint], number>;
  /** the context's values (ContextEntry without its id) when no event refers to it any more */
  orphan: Database.Statement<[number, number], OrphanContext | undefined>;
  removeContext: Database.Statement<[number]>;
}

export class Pruner {
  private readonly tiers: Record<Tier, TierStatements>;
  private readonly cleanup: ContextCleanup;
  private readonly targetCleanup: Record<Tier, TargetCleanup>;
  private readonly insertPruned: Database.Statement<[bigint, string, bigint, bigint, number, number]>;
  private readonly pageCount: () => number;
  private readonly freePages: () => number;
  private readonly pageSize: number;
  /* where shipping stands: the first unshipped seq (null: nothing ships), and the oldest ts from there */
  private readonly unshippedSeq: () => number | null;
  private readonly oldestFromSeq: Database.Statement<[number], bigint | null>;
  /* the oldest row of a tier is at or after this; saves rescanning rows of the other tier */
  private readonly floor: Record<Tier, bigint> = { background: 0n, context: 0n };
  private overCap = false;

  /**
   * walAllowance: bytes kept free under the cap for the WAL (walAllowanceFor),
   * so pages in use plus the WAL stay under it.
   */
  constructor(
    private readonly db: Database.Database,
    private readonly policy: RetentionPolicy,
    private readonly walAllowance: number,
    private readonly walBytes: () => number,
    private readonly now: () => bigint,
  ) {
    const statements = (where: string): TierStatements => ({
      nth: db
        .prepare<[bigint, bigint, number], bigint | null>(
          `SELECT ts FROM events WHERE ${where} AND ts >= ? AND ts < ? ORDER BY ts LIMIT 1 OFFSET ?`,
        )
        .pluck()
        .safeIntegers(true),
      first: db
        .prepare<[bigint, bigint], bigint | null>(
          `SELECT ts FROM events WHERE ${where} AND ts >= ? AND ts < ? ORDER BY ts LIMIT 1`,
        )
        .pluck()
        .safeIntegers(true),
      last: db
        .prepare<[bigint, bigint], bigint | null>(
          `SELECT ts FROM events WHERE ${where} AND ts >= ? AND ts < ? ORDER BY ts DESC LIMIT 1`,
        )
        .pluck()
        .safeIntegers(true),
      remove: db.prepare(`DELETE FROM events WHERE ${where} AND ts >= ? AND ts <= ? AND ts < ?`),
      countFromSeq: db
        .prepare<[bigint, bigint, bigint, number], number>(
          `SELECT count(*) FROM events WHERE ${where} AND ts >= ? AND ts <= ? AND ts < ? AND seq >= ?`,
        )
        .pluck(),
    });
    // the oldest unshipped event: walks events_by_seq from the shipper's cursor (all of a backlog)
    this.oldestFromSeq = db
      .prepare<[number], bigint | null>('SELECT min(ts) FROM events WHERE seq >= ?')
      .pluck()
      .safeIntegers(true);
    this.unshippedSeq = () => firstUnshippedSeq(db);
    this.tiers = { background: statements(TIER_WHERE.background), context: statements(TIER_WHERE.context) };
    this.cleanup = {
      removeReturning: db
        .prepare<[bigint, bigint, bigint], number>(
          `DELETE FROM events WHERE ${TIER_WHERE.context} AND ts >= ? AND ts <= ? AND ts < ? RETURNING ctx`,
        )
        .pluck(),
      orphan: db
        .prepare<[number, number], OrphanContext | undefined>(
          'SELECT transaction_id, trace_id, parent_span_id, trace_flags FROM contexts WHERE id = ? AND NOT EXISTS (SELECT 1 FROM events WHERE ctx = ?)',
        )
        .raw(),
      removeContext: db.prepare('DELETE FROM contexts WHERE id = ?'),
    };
    const targetStatements = (tier: Tier, other: Tier): TargetCleanup => ({
      // one pass over the range's rows: the targets whose tier it empties, and whether the other holds them
      release: db
        .prepare<[TargetRange], [number, number]>(
          `UPDATE targets SET ${TARGET_LAST[tier]} = NULL
           WHERE id IN (SELECT target FROM events WHERE ${TIER_WHERE[tier]} AND ts >= @from AND ts <= @to AND ts < @before)
             AND ${TARGET_LAST[tier]} <= @to
           RETURNING id, ${TARGET_LAST[other]} IS NULL`,
        )
        .raw(),
      remove: db.prepare('DELETE FROM targets WHERE id = ?'),
    });
    this.targetCleanup = {
      background: targetStatements('background', 'context'),
      context: targetStatements('context', 'background'),
    };
    this.insertPruned = db.prepare(
      'INSERT INTO pruned (at_ns, reason, from_ns, to_ns, background, context) VALUES (?, ?, ?, ?, ?, ?)',
    );
    const pageCount = db.prepare('PRAGMA page_count').pluck();
    const freePages = db.prepare('PRAGMA freelist_count').pluck();
    this.pageCount = () => pageCount.get() as number;
    this.freePages = () => freePages.get() as number;
    this.pageSize = db.pragma('page_size', { simple: true }) as number;
  }

  /**
   * Rows stamped from `minTs` on are being stored. Stamped before a floor (the wall clock stepped
   * back past the rows removed), they would be under it, out of reach of the cap and of retention
   * for good: the floors come down to them.
   */
  inserted(minTs: bigint): void {
    for (const tier of ['background', 'context'] as const)
      if (minTs < this.floor[tier]) this.floor[tier] = minTs;
  }

  /** Bytes the store occupies in pages in use, plus what the WAL may take: what the cap bounds. */
  usedBytes(): number {
    return (
      (this.pageCount() - this.freePages()) * this.pageSize + Math.max(this.walAllowance, this.walBytes())
    );
  }

  /** Bytes of the store file itself (free pages included) and its WAL. */
  fileBytes(): number {
    return this.pageCount() * this.pageSize + this.walBytes();
  }

  /** One step of at most STEP_ROWS rows, or null when nothing is due. */
  step(): PruneStep | null {
    const now = this.now();
    // where shipping stands, read once a step needs it: the idle writer's step every second, with
    // nothing due, read it for nothing (a pragma and a statement prepared: ~40% of its idle CPU)
    let seq: number | null | undefined;
    const unshippedSeq = (): number | null => (seq === undefined ? (seq = this.unshippedSeq()) : seq);
    // retention times stop at the oldest unshipped event; the cap does not. That event is looked
    // for only when the tier has rows past the cutoff: the walk reads the whole shipping backlog.
    const keep = (tier: Tier, cutoff: bigint) => {
      if (this.tiers[tier].first.get(this.floor[tier], cutoff) == null) return cutoff;
      const unshipped = unshippedSeq();
      if (unshipped === null) return cutoff;
      const ts = this.oldestFromSeq.get(unshipped) ?? null;
      return ts !== null && ts < cutoff ? ts : cutoff;
    };
    if (this.policy.maxStoreBytes > 0) {
      const used = this.usedBytes();
      if (used > this.policy.maxStoreBytes * HIGH_WATER) this.overCap = true;
      else if (used < this.policy.maxStoreBytes * LOW_WATER) this.overCap = false;
      if (this.overCap) {
        const excess = used - this.policy.maxStoreBytes * LOW_WATER;
        const rows = Math.min(STEP_ROWS, Math.max(CAP_MIN_STEP_ROWS, Math.ceil(excess / CAP_BYTES_PER_ROW)));
        const step =
          this.removeOldest('background', ANY_TS, 'max-store-bytes', rows, unshippedSeq() ?? undefined) ??
          this.removeOldest('context', ANY_TS, 'max-store-bytes', rows, unshippedSeq() ?? undefined);
        if (step) return step;
        this.overCap = false; // nothing left to remove: the rest is dictionaries and history
      }
    }
    if (this.policy.retainNs > 0) {
      const step = this.removeOldest(
        'background',
        keep('background', now - BigInt(this.policy.retainNs)),
        'retain',
      );
      if (step) return step;
    }
    if (this.policy.retainContextNs > 0) {
      const step = this.removeOldest(
        'context',
        keep('context', now - BigInt(this.policy.retainContextNs)),
        'retain-context',
      );
      if (step) return step;
    }
    return null;
  }

  /**
   * Steps until `rows` rows went (or, over the cap, until the store is back
   * under it) or nothing is due; returns the steps taken.
   */
  run(rows: number, afterStep: () => void = () => undefined): PruneStep[] {
    const steps: PruneStep[] = [];
    let removed = 0;
    while ((removed < rows || this.overCap) && removed < Math.max(MAX_RUN_ROWS, 2 * rows)) {
      const step = this.step();
      if (!step) break;
      steps.push(step);
      removed += step.background + step.context;
      afterStep();
    }
    return steps;
  }

  private removeOldest(
    tier: Tier,
    before: bigint,
    reason: PruneReason,
    rows = STEP_ROWS,
    unshippedSeq?: number,
  ): PruneStep | null {
    const s = this.tiers[tier];
    const floor = this.floor[tier];
    const from = s.first.get(floor, before);
    if (from === null || from === undefined) {
      // Rows older than a retention cutoff never come back, so the next scan may start there.
      if (reason !== 'max-store-bytes') this.floor[tier] = before;
      return null;
    }
    const to = s.nth.get(from, before, rows - 1) ?? s.last.get(from, before)!;
    const forgotten: ContextEntry[] = [];
    let unshipped = 0;
    const removed = this.db.transaction(() => {
      if (unshippedSeq !== undefined) unshipped = s.countFromSeq.get(from, to, before, unshippedSeq) ?? 0;
      const targets = this.targetCleanup[tier];
      for (const [id, unused] of targets.release.all({ from, to, before }))
        if (unused) targets.remove.run(id);
      let n: number;
      if (tier === 'background') n = s.remove.run(from, to, before).changes;
      else {
        const touched = this.cleanup.removeReturning.all(from, to, before);
        n = touched.length;
        for (const id of new Set(touched)) {
          const orphan = this.cleanup.orphan.get(id, id);
          if (!orphan) continue;
          this.cleanup.removeContext.run(id);
          forgotten.push([id, ...orphan]);
        }
      }
      this.insertPruned.run(
        this.now(),
        reason,
        from,
        to,
        tier === 'background' ? n : 0,
        tier === 'context' ? n : 0,
      );
      return n;
    })();
    this.floor[tier] = to + 1n;
    return {
      reason,
      fromNs: from,
      toNs: to,
      background: tier === 'background' ? removed : 0,
      context: tier === 'context' ? removed : 0,
      unshipped,
      forgotten,
    };
  }
}
