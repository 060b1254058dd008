/**
 * The real clock thread writes a handed-over stream's frames itself: with
 * the main thread blocked for the whole replay (as a burst of queries would
 * hold it), every frame is still written on its deadline, in order, with the
 * lateness the clock released it at; the stream's bytes reach the client
 * exactly once. Times are compared only with each other (written before the
 * main thread was free again), never with a fixed bound.
 */
import { once } from 'node:events';
import { createServer, connect, type Socket } from 'node:net';
import { silentLogger } from '../../core/log/logger';
import { HighResClock } from '../../daemon/replay/clock/high-res-clock';
import type { SocketClosed } from '../../daemon/replay/replay-clock';
import { ArmedLane } from '../support/armed-lane';
import { LatenessLog } from '../../daemon/replay/lateness-log';
import { ReleaseStats } from '../../daemon/replay/release-stats';
import { waitFor } from '../support/wait';

const FRAMES = 20;
const GAP_NS = 5_000_000n;

/** A connected pair over loopback: the server's side (handed to the clock) and the client's. */
async function connection(): Promise<{ server: Socket; client: Socket; close: () => void }> {
  const listener = createServer();
  listener.listen(0, '127.0.0.1');
  await once(listener, 'listening');
  const accepted = once(listener, 'connection');
  const { port } = listener.address() as { port: number };
  const client = connect(port, '127.0.0.1');
  const [server] = (await accepted) as [Socket];
  return {
    server,
    client,
    close: () => {
      client.destroy();
      server.destroy();
      listener.close();
    },
  };
}

const fdOf = (socket: Socket) => (socket as unknown as { _handle: { fd: number } })._handle.fd;

describe('the clock thread writing a stream while the main thread is blocked', () => {
  let clock: HighResClock;
  beforeAll(async () => {
    clock = new HighResClock(silentLogger);
    await clock.ready();
  });
  afterAll(() => clock.close());

  it('writes every frame on its deadline, in order, before the main thread is free again', async () => {
    const { server, client, close } = await connection();
    let received = '';
    client.setEncoding('utf8').on('data', (chunk: string) => (received += chunk));
    const closed: SocketClosed[] = [];
    const released: { deadline: bigint; releasedAt: bigint; writtenAt: bigint | null }[] = [];
    const armed: bigint[] = [];
    const lane = new ArmedLane(
      clock,
      clock.lane(({ count, releasedAt, writtenAt }) => {
        for (const deadline of armed.splice(0, count)) released.push({ deadline, releasedAt, writtenAt });
      }),
    );
    const stats = new ReleaseStats();
    const log = new LatenessLog();
    lane.lane.keep(stats, log.ensure(FRAMES));
    const watcher = lane.lane.sockets!.attach(fdOf(server), 0, 'event: state\n\n', (reason) =>
      closed.push(reason),
    );

    const start = clock.now() + clock.leadNs() + 20_000_000n;
    for (let i = 0; i < FRAMES; i++) {
      const deadline = start + BigInt(i) * GAP_NS;
      armed.push(deadline);
      lane.at(deadline, {
        index: i,
        head: `id: ${i}\nevent: replay\ndata: {"emitted_late_ns":`,
        tail: '}\n\n',
      });
    }
    // the deadlines reach the thread at the end of this task: block the main thread in the next one
    await new Promise((resolve) => setImmediate(resolve));
    const last = start + BigInt(FRAMES - 1) * GAP_NS;
    while (clock.now() < last + 20_000_000n) {
      // busy, as a main thread serving a burst of queries is: no timer, no I/O runs
    }
    const freeAt = clock.now();

    await waitFor(() => released.length >= FRAMES, { what: 'every frame released' });
    expect(released).toHaveLength(FRAMES);
    for (const r of released) {
      expect(r.writtenAt).not.toBeNull();
      expect(r.writtenAt!).toBeLessThan(freeAt);
      expect(r.writtenAt!).toBeGreaterThanOrEqual(r.releasedAt);
      expect(r.releasedAt).toBeGreaterThanOrEqual(r.deadline);
    }
    // what the clock spliced into each frame is what it kept in the session's lateness log, and
    // each event was released at or after its deadline, no later than the report that told it
    const lateness = released.map((_, i) => String(log.get(i)));
    released.forEach((r, i) => expect(r.deadline + log.get(i)!).toBeLessThanOrEqual(r.releasedAt));
    expect(stats.lateness.count).toBe(FRAMES);
    const expected =
      'event: state\n\n' +
      lateness.map((late, i) => `id: ${i}\nevent: replay\ndata: {"emitted_late_ns":${late}}\n\n`).join('');
    await waitFor(() => received.length >= expected.length, { what: 'every frame received' });
    expect(received).toBe(expected);

    // the end comes after what was sent before it, then the clock's copy of the socket is closed
    lane.lane.sockets!.send(watcher, ': bye\n\n');
    lane.lane.sockets!.end(watcher);
    await waitFor(() => closed.length > 0, { what: "the clock's copy of the socket closed" });
    expect(closed).toEqual(['ended']);
    await waitFor(() => received.length > expected.length, { what: 'the last text received' });
    expect(received).toBe(`${expected}: bye\n\n`);
    lane.clear(true);
    close();
  }, 30_000);
});
