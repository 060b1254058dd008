/**
 * A daemon stand-in for `kreplay replay --exec` tests: GET /api/events serves
 * a hand-made incident whose writes carry exact targets and durations, and
 * the replay routes are the daemon's own (real sessions, high-resolution clock).
 */
import express from 'express';
import { silentLogger } from '../../core/log/logger';
import { exactJson } from '../../core/json/exact-json';
import type { SysWriteEvent, TargetKind } from '../../core/model';
import { HighResClock } from '../../daemon/replay/clock/high-res-clock';
import { StreamLimits } from '../../daemon/replay/stream/stream-limits';
import { replaySessionsRouter } from '../../daemon/replay/sessions/session-router';
import { ReplaySessions } from '../../daemon/replay/sessions/session-service';
import { errorHandler } from '../../daemon/http/error-handler';
import { listen } from '../../daemon/server';
import { FakeTransactionReader, fakeEvent } from './fake-transaction-reader';

export type IncidentEvent = SysWriteEvent;

/** A sys_write of transaction `txn` to `target`, `offsetMs` after T0, taking `durationMs`. */
export function incidentWrite(
  txn: string,
  offsetMs: number,
  durationMs: number,
  target: string,
  kind: TargetKind,
): IncidentEvent {
  const T0 = 1_795_000_000_000_000_000n;
  const ts = T0 + BigInt(Math.round(offsetMs * 1e6));
  const event = fakeEvent(txn, ts, 0, BigInt(Math.round(durationMs * 1e6))) as SysWriteEvent;
  return { ...event, target, target_kind: kind };
}

/**
 * An event of another syscall type (sys_fsync, sys_connect) or a write with
 * its syscall, bytes and ret: `incidentWrite` with those fields replaced.
 */
export function incidentCall(
  txn: string,
  offsetMs: number,
  durationMs: number,
  eventType: 'sys_write' | 'sys_fsync' | 'sys_connect',
  target: string,
  kind: TargetKind,
  fields: { syscall?: string; bytes?: number; ret?: number } = {},
): IncidentEvent {
  // the stand-in serves every field as it is; the type only names sys_write's
  return {
    ...incidentWrite(txn, offsetMs, durationMs, target, kind),
    ...fields,
    event_type: eventType as 'sys_write',
  };
}

export interface ExecDaemon {
  url: string;
  sessions: ReplaySessions;
  close(): Promise<void>;
}

/** Serves `events` on 127.0.0.1 (any port), sessions persisted in `dataDir`. */
export async function startExecDaemon(events: IncidentEvent[], dataDir: string): Promise<ExecDaemon> {
  const clock = new HighResClock(silentLogger);
  const sessions = new ReplaySessions({
    dataDir,
    reader: new FakeTransactionReader(events),
    clock,
    log: silentLogger,
    ttlMs: 600_000,
  });
  const app = express();
  app.get('/api/events', (req, res) => {
    const wanted = events.filter((e) => e.transaction_id === req.query.transaction_id);
    res.type('application/json').send(`{"events":${exactJson(wanted, true)},"next_cursor":null}`);
  });
  app.use('/api/replay/sessions', replaySessionsRouter(sessions, new StreamLimits(silentLogger)));
  app.use(errorHandler(silentLogger));
  const running = await listen(app, '127.0.0.1', 0);
  return {
    url: running.url,
    sessions,
    close: async () => {
      const closing = running.close();
      await sessions.close();
      await closing;
      await clock.close();
    },
  };
}
