/** GET /api/events over a store that retention pruned: what is gone is said, what is kept is whole. */
import { formatTimeNs } from '../../daemon/http/query-values';
import { openRetainingWriter, writeEvents } from '../support/event-store';
import { get, startEventsServer, type EventsServer } from '../support/events-http';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-events-retention-');
const HOUR = 3_600_000_000_000n;
const NOW = 1_795_345_678_000_000_000n;
const at = (hoursAgo: number) => NOW - BigInt(hoursAgo) * HOUR;

describe('GET /api/events after retention', () => {
  let server: EventsServer;

  beforeEach(async () => {
    const writer = openRetainingWriter(dir.path, 'alpha', NOW);
    // One event an hour for 10 hours back, background and with transaction t1 alike.
    writeEvents(
      writer,
      Array.from({ length: 10 }, (_, i) => [
        { ts: at(10 - i) + 1n, service: 'bg' },
        { ts: at(10 - i) + 2n, service: 'tx', txn: 't1' },
      ]).flat(),
    );
    writer.prune(1000);
    writer.close();
    server = await startEventsServer(dir.path);
  });
  afterEach(() => server.close());

  const query = async (q: string) => {
    const reply = await get(`${server.url}/api/events?int64=string&${q}`);
    expect(reply.status).toBe(200);
    return JSON.parse(reply.text) as {
      events: { service_name: string; timestamp_ns: string }[];
      retained_from_ns?: string;
    };
  };

  it('answers a range wholly before the retained one with an empty page and retained_from_ns', async () => {
    const body = await query(`transaction_id=t1&to=${formatTimeNs(at(9))}`);
    expect(body.events).toEqual([]);
    // the last context event pruned was 9 h back (+2 ns): the context tier is whole after it
    expect(body.retained_from_ns).toBe(String(at(9) + 3n));
  });

  it('returns what is kept across the boundary, and says where the background tier is whole from', async () => {
    const body = await query(`from=${formatTimeNs(at(9))}`);
    expect(body.events.map((e) => [e.service_name, BigInt(e.timestamp_ns)])).toEqual([
      ['tx', at(8) + 2n],
      ['tx', at(7) + 2n],
      ...[6, 5, 4, 3, 2, 1].flatMap((h) => [
        ['bg', at(h) + 1n],
        ['tx', at(h) + 2n],
      ]),
    ]);
    // background events up to 7 h back (+1 ns) are gone
    expect(body.retained_from_ns).toBe(String(at(7) + 2n));
  });

  it('leaves retained_from_ns out when the range lies inside what is kept', async () => {
    const body = await query(`from=${formatTimeNs(at(5))}`);
    expect(body.events).toHaveLength(10);
    expect(body.retained_from_ns).toBeUndefined();
  });
});

describe('GET /api/events after retention removed every context and the agent restarted', () => {
  it("names a new transaction's events by it, never by the removed one whose id a running daemon read", async () => {
    const open = () => openRetainingWriter(dir.path, 'beta', NOW);
    let writer = open();
    writeEvents(writer, [{ ts: at(10), service: 'tx', txn: 'before' }]);
    writer.close();
    const server = await startEventsServer(dir.path);
    try {
      const read = async (from: bigint) => {
        const reply = await get(`${server.url}/api/events?node=beta&from=${formatTimeNs(from)}`);
        expect(reply.status).toBe(200);
        return (JSON.parse(reply.text) as { events: { transaction_id: string | null }[] }).events.map(
          (e) => e.transaction_id,
        );
      };
      // the daemon reads (and keeps) the context's id
      expect(await read(at(11))).toEqual(['before']);
      // retention removes the transaction, its context with it; a restarted agent stores a new one
      writer = open();
      writer.prune(1000);
      writer.close();
      writer = open();
      writeEvents(writer, [{ ts: at(1), service: 'tx', txn: 'after' }]);
      writer.close();
      expect(await read(at(11))).toEqual(['after']);
    } finally {
      await server.close();
    }
  });
});
