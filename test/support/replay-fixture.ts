/** Replay sessions over in-memory events and a fake clock, and a watcher that keeps what it is sent. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import type { ApiEvent } from '../../core/model';
import { SseParser, type SseMessage } from '../../cli/sse-client';
import { ReplaySessions } from '../../daemon/replay/sessions/session-service';
import type { Watcher } from '../../daemon/replay/stream/broadcast';
import { FakeClock } from './fake-clock';
import { FakeTransactionReader } from './fake-transaction-reader';

/** A factory of fixtures, each in a temp data dir; closed and removed after each test. */
export function useReplayFixtures(prefix: string) {
  const open: { sessions: ReplaySessions; dataDir: string }[] = [];
  // every fixture closed before any dir goes: two fixtures may share one (a daemon restart), and
  // the second may still be saving into it while the first's is removed
  afterEach(async () => {
    const fixtures = open.splice(0);
    for (const { sessions } of fixtures) await sessions.close();
    for (const dataDir of new Set(fixtures.map((f) => f.dataDir)))
      rmSync(dataDir, { recursive: true, force: true });
  });
  return (events: ApiEvent[], { ttlMs = 60_000, dataDir = mkdtempSync(join(tmpdir(), prefix)) } = {}) => {
    const clock = new FakeClock();
    const source = new FakeTransactionReader(events);
    const sessions = new ReplaySessions({ dataDir, reader: source, clock, log: silentLogger, ttlMs });
    open.push({ sessions, dataDir });
    return { clock, source, sessions, dataDir };
  };
}

/** A watcher that parses and keeps every message. */
export class CapturedStream implements Watcher {
  readonly messages: SseMessage[] = [];
  ended = false;
  private readonly parser = new SseParser();

  write(text: string): void {
    this.messages.push(...this.parser.push(text));
  }

  end(): void {
    this.ended = true;
  }

  /** The data of each replay event, parsed (integers beyond 2^53 lose digits: compare offsets only). */
  replays(): { id: number; data: Record<string, unknown> }[] {
    return this.messages
      .filter((m) => m.event === 'replay')
      .map((m) => ({ id: Number(m.id), data: JSON.parse(m.data) as Record<string, unknown> }));
  }

  states(): string[] {
    return this.messages
      .filter((m) => m.event === 'state')
      .map((m) => (JSON.parse(m.data) as { state: string }).state);
  }
}

/** Lets queued microtasks (the broadcast's flush) run. */
export const settle = () => new Promise<void>((resolve) => setImmediate(resolve));
