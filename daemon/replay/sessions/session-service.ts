/**
 * The replay sessions of the daemon: creation within the live-session
 * limits (in total and per client), lookup, removal, expiry of sessions left
 * alone (ready and paused after the idle TTL, finished and stopped after the
 * session TTL), and their persistence across restarts.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../../../core/log/logger';
import { notFound, ProblemError } from '../../http/problem';
import type { ReplayClock } from '../replay-clock';
import type { TransactionReader } from '../transaction-reader';
import type { Watcher } from '../stream/broadcast';
import { ReplaySession, type SessionContext, type TimingObserver } from './replay-session';
import { SessionFile } from './session-file';
import type { RestoredSession } from './session-snapshot';
import type { CreateSessionBody } from './session-schema';
import { isLive } from './session-state';
import { Transaction } from './transaction';
import { systemWallClock, type WallClock } from './wall-clock';
import {
  DEFAULT_IDLE_SESSION_TTL_SECONDS,
  DEFAULT_MAX_SESSIONS,
  DEFAULT_MAX_SESSIONS_PER_CLIENT,
} from './session-limits';

/** How often the positions of playing sessions are saved, for a daemon that dies without stopping. */
const CHECKPOINT_MS = 2000;
/** How often sessions that drive a process check that it still runs. */
const DRIVER_CHECK_MS = 500;
/** Retry-After when no playing session will free a slot by finishing. */
const RETRY_AFTER_IDLE_SECONDS = 60;

export interface ReplaySessionsOptions {
  dataDir: string;
  /** where transactions are read: the query workers (node files) or ClickHouse */
  reader: TransactionReader;
  clock: ReplayClock;
  /** the wall time of updated_at and the TTLs (the system's unless a test moves it) */
  wall?: WallClock;
  log: Logger;
  /** finished and stopped sessions are removed after this long without a change */
  ttlMs: number;
  /** ready and paused sessions are removed after this long without a change (default 1 h) */
  idleTtlMs?: number;
  /** live (ready, playing, paused) sessions at most, in all and per client */
  maxSessions?: number;
  maxSessionsPerClient?: number;
  /** told every event's release and delivery lateness (the daemon's metrics) */
  timing?: TimingObserver;
}

export class ReplaySessions {
  private readonly sessions = new Map<string, ReplaySession>();
  /** what cancels each session's expiry */
  private readonly expiries = new Map<string, () => void>();
  private readonly file: SessionFile;
  private readonly context: SessionContext;
  private readonly checkpoint: NodeJS.Timeout;
  private readonly driverCheck: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly options: ReplaySessionsOptions) {
    this.context = {
      clock: options.clock,
      wall: options.wall ?? systemWallClock,
      changed: (session) => this.changed(session),
      timing: options.timing,
    };
    this.file = new SessionFile(options.dataDir, options.log, () => this.list().map((s) => s.snapshot()));
    const saved = this.file.load();
    for (const s of saved) this.restore(s);
    if (saved.length > 0) options.log.info('replay sessions restored', { sessions: saved.length });
    this.checkpoint = setInterval(() => {
      if (this.list().some((s) => s.state === 'playing')) this.file.save();
    }, CHECKPOINT_MS).unref();
    this.driverCheck = setInterval(() => this.stopOrphans(), DRIVER_CHECK_MS).unref();
  }

  /** A saved session, its transaction pinned to the span it had (nothing is read until it plays). */
  private restore(saved: RestoredSession): void {
    const transaction = new Transaction(
      this.options.reader,
      saved.transaction_id,
      saved.first_ts,
      saved.last_ts,
      saved.events_total,
      this.options.log,
    );
    const session = ReplaySession.restore(saved, transaction, this.context);
    this.sessions.set(session.id, session);
    this.armExpiry(session);
  }

  /**
   * A session for `owner` (the client: its token's name, else its address),
   * once its transaction is found in the store. `driving` may be left out by
   * callers that drive nothing.
   */
  async create(
    body: Omit<CreateSessionBody, 'driving'> & Partial<Pick<CreateSessionBody, 'driving'>>,
    owner = 'local',
  ): Promise<ReplaySession> {
    this.checkLimits(owner); // before reading: a refused session should not cost a read
    const transaction = await Transaction.find(this.options.reader, body.transaction_id, this.options.log);
    if (!transaction)
      throw notFound(
        'transaction-not-found',
        `no events with transaction_id ${JSON.stringify(body.transaction_id)}`,
      );
    // others may have been created while it was read
    this.checkLimits(owner);
    const session = new ReplaySession(
      {
        id: randomUUID(),
        transaction,
        speedFactor: body.speed_factor,
        extraLatencyNs: body.extra_latency_ns,
        driving: body.driving ?? null,
        owner,
      },
      this.context,
    );
    this.sessions.set(session.id, session);
    this.armExpiry(session);
    this.file.save();
    return session;
  }

  /** Within the live-session limits, in all and for `owner`; else 429. */
  private checkLimits(owner: string): void {
    this.checkOpen();
    const live = this.list().filter((s) => isLive(s.state));
    const max = this.options.maxSessions ?? DEFAULT_MAX_SESSIONS;
    if (live.length >= max)
      throw new ProblemError(
        'too-many-sessions',
        `at most ${max} sessions may be ready, playing or paused on this daemon; stop or delete one`,
        undefined,
        { 'Retry-After': String(retryAfterSeconds(live)) },
      );
    const own = live.filter((s) => s.owner === owner);
    const perClient = this.options.maxSessionsPerClient ?? DEFAULT_MAX_SESSIONS_PER_CLIENT;
    if (own.length >= perClient)
      throw new ProblemError(
        'too-many-sessions',
        `${owner} has ${own.length} sessions ready, playing or paused, the most one client may have; stop or delete one`,
        undefined,
        { 'Retry-After': String(retryAfterSeconds(own)) },
      );
  }

  get(id: string): ReplaySession {
    this.checkOpen();
    const session = this.sessions.get(id);
    if (!session) throw notFound('session-not-found', `no replay session ${id}`);
    return session;
  }

  /** In creation order. */
  list(): ReplaySession[] {
    return [...this.sessions.values()];
  }

  /** Stops the session, ends its streams and forgets it. */
  remove(id: string): void {
    const session = this.get(id);
    session.stop();
    this.sessions.delete(id);
    this.expiries.get(id)?.();
    this.expiries.delete(id);
    this.file.save();
  }

  /** Attaches a stream (`from`: ReplaySession.watch), unless the daemon is shutting down meanwhile. */
  watch(session: ReplaySession, watcher: Watcher, from?: number): void {
    if (this.closed) watcher.end();
    else session.watch(watcher, from);
  }

  /** Pauses what plays, ends every stream, and saves the sessions for the next start. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.checkpoint);
    clearInterval(this.driverCheck);
    for (const cancel of this.expiries.values()) cancel();
    this.expiries.clear();
    for (const session of this.sessions.values()) session.shutdown();
    await this.file.release();
  }

  private checkOpen(): void {
    if (this.closed) throw new ProblemError('shutting-down', 'the daemon is shutting down');
  }

  /** A session whose driven process is gone (its kreplay killed, say) has nothing left to drive: stopped. */
  private stopOrphans(): void {
    for (const session of this.sessions.values()) {
      if (!session.driving || !isLive(session.state) || processExists(session.driving.pid)) continue;
      this.options.log.info('replay session stopped: the process it drove is gone', {
        id: session.id,
        pid: session.driving.pid,
      });
      session.stop();
    }
  }

  private changed(session: ReplaySession): void {
    if (this.sessions.get(session.id) !== session) return;
    this.armExpiry(session);
    this.file.save();
  }

  /** Sessions go a TTL after their last change: idle ones (ready, paused) and ended ones each have theirs; playing ones stay. */
  private armExpiry(session: ReplaySession): void {
    this.expiries.get(session.id)?.();
    this.expiries.delete(session.id);
    if (session.state === 'playing' || this.closed) return;
    const ttlMs = isLive(session.state)
      ? (this.options.idleTtlMs ?? DEFAULT_IDLE_SESSION_TTL_SECONDS * 1000)
      : this.options.ttlMs;
    const at = Date.parse(session.updatedAt) + ttlMs;
    this.expiries.set(
      session.id,
      this.context.wall.at(at, () => this.expire(session.id)),
    );
  }

  private expire(id: string): void {
    this.options.log.info('replay session expired', { id, state: this.sessions.get(id)?.state });
    this.remove(id);
  }
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/** Seconds until the first playing session finishes, which frees a slot. */
function retryAfterSeconds(live: ReplaySession[]): number {
  const remaining = live.filter((s) => s.state === 'playing').map((s) => s.remainingNs);
  if (remaining.length === 0) return RETRY_AFTER_IDLE_SECONDS;
  const first = remaining.reduce((a, b) => (a < b ? a : b));
  return Math.max(1, Math.ceil(Number(first) / 1e9));
}
