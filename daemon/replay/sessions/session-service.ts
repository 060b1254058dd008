/**
 * The replay sessions of the daemon: creation within the live-session
 * limits (in total and per client), lookup, removal, expiry of sessions left
 * alone (ready and paused after the idle TTL, finished and stopped after the
 * session TTL), and their persistence across restarts.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../../../core/log/logger';
import { notFound, ProblemError } from '../../http/problem';
import type { ReplayClock } from '../clock/replay-clock';
import type { ReplaySource } from '../replay-source';
import type { Watcher } from '../stream/broadcast';
import { ReplaySession, type SessionContext, type TimingObserver } from './replay-session';
import { SessionFile } from './session-file';
import type { CreateSessionBody } from './session-schema';
import { isLive } from './session-state';
import { Transaction } from './transaction';

export const DEFAULT_MAX_SESSIONS = 64;
/** A quarter of the total: one client cannot take every slot. */
export const DEFAULT_MAX_SESSIONS_PER_CLIENT = 16;
export const DEFAULT_SESSION_TTL_SECONDS = 600;
export const DEFAULT_IDLE_SESSION_TTL_SECONDS = 3600;
/** How often the positions of playing sessions are saved, for a daemon that dies without stopping. */
const CHECKPOINT_MS = 2000;
/** The longest delay setTimeout takes (2^31 − 1 ms, about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** How often sessions that drive a process check that it still runs. */
const DRIVER_CHECK_MS = 500;
/** Retry-After when no playing session will free a slot by finishing. */
const RETRY_AFTER_IDLE_SECONDS = 60;

export interface ReplaySessionsOptions {
  dataDir: string;
  source: ReplaySource;
  clock: ReplayClock;
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
  private readonly expiries = new Map<string, NodeJS.Timeout>();
  private readonly file: SessionFile;
  private readonly context: SessionContext;
  private readonly checkpoint: NodeJS.Timeout;
  private readonly driverCheck: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly options: ReplaySessionsOptions) {
    this.context = {
      clock: options.clock,
      changed: (session) => this.changed(session),
      timing: options.timing,
    };
    this.file = new SessionFile(options.dataDir, options.log, () => this.list().map((s) => s.snapshot()));
    for (const saved of this.file.load()) {
      const transaction = new Transaction(
        options.source,
        saved.transaction_id,
        saved.first_ts,
        saved.last_ts,
        saved.events_total,
      );
      const session = ReplaySession.restore(saved, transaction, this.context);
      this.sessions.set(session.id, session);
      this.armExpiry(session);
    }
    if (this.sessions.size > 0)
      options.log.info('replay sessions restored', { sessions: this.sessions.size });
    this.checkpoint = setInterval(() => {
      if (this.list().some((s) => s.state === 'playing')) this.file.save();
    }, CHECKPOINT_MS).unref();
    this.driverCheck = setInterval(() => this.stopOrphans(), DRIVER_CHECK_MS).unref();
  }

  /**
   * A session for `owner` (the client: its token's name, else its address).
   * `driving` may be left out by callers that drive nothing.
   */
  create(
    body: Omit<CreateSessionBody, 'driving'> & Partial<Pick<CreateSessionBody, 'driving'>>,
    owner = 'local',
  ): ReplaySession {
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
    const transaction = Transaction.find(this.options.source, body.transaction_id);
    if (!transaction)
      throw notFound(
        'transaction-not-found',
        `no events with transaction_id ${JSON.stringify(body.transaction_id)}`,
      );
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
    clearTimeout(this.expiries.get(id));
    this.expiries.delete(id);
    this.file.save();
  }

  /** Attaches a stream, unless the daemon is shutting down meanwhile. */
  watch(session: ReplaySession, watcher: Watcher): void {
    if (this.closed) watcher.end();
    else session.watch(watcher);
  }

  /** Pauses what plays, ends every stream, and saves the sessions for the next start. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.checkpoint);
    clearInterval(this.driverCheck);
    for (const timer of this.expiries.values()) clearTimeout(timer);
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
    clearTimeout(this.expiries.get(session.id));
    this.expiries.delete(session.id);
    if (session.state === 'playing' || this.closed) return;
    const ttlMs = isLive(session.state)
      ? (this.options.idleTtlMs ?? DEFAULT_IDLE_SESSION_TTL_SECONDS * 1000)
      : this.options.ttlMs;
    const remainingMs = ttlMs - (Date.now() - Date.parse(session.updatedAt));
    // Node fires a longer timeout at once: a TTL of days is waited out in steps
    const timer = setTimeout(
      () => (remainingMs > MAX_TIMER_MS ? this.armExpiry(session) : this.expire(session.id)),
      Math.min(Math.max(0, remainingMs), MAX_TIMER_MS),
    );
    this.expiries.set(session.id, timer.unref());
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
