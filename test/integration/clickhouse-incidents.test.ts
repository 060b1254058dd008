/**
 * A daemon reading the fleet store (--store clickhouse://…) also serves the
 * incident files dropped into its data dir: an incident the fleet does not
 * hold is searchable and replayable by its transaction, and one the fleet
 * holds is served once, from the fleet.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { migrateClickHouse } from '../../core/clickhouse/schema';
import { silentLogger } from '../../core/log/logger';
import type { ApiEvent } from '../../core/model';
import { createDaemon, type Daemon } from '../../daemon/create-daemon';
import { KREPLAY_BIN } from '../support/agent-process';
import { clickhouseAvailable, useClickHouse } from '../support/clickhouse-server';
import { fetchAllPages } from '../support/events-http';
import { incidentEvents } from '../support/incident-events';
import { writeIncident } from '../support/incident-file';
import { api } from '../support/replay-http';
import { useTempDir } from '../support/temp-dir';

const describeCh = clickhouseAvailable ? describe : describe.skip;
if (!clickhouseAvailable)
  console.warn('SKIPPED: clickhouse-server is not installed (make setup installs it)');

/** The same made-up events recorded by other stores (an incident from elsewhere). */
const fromOtherStores = (events: ApiEvent[]): ApiEvent[] =>
  events.map((e) => ({
    ...e,
    event_id: e.event_id.replace(/^a1b2c3d4e5f6/, 'b1b1b1b1b1b1').replace(/^0f0e0d0c0b0a/, 'c2c2c2c2c2c2'),
  }));

describeCh('incident files beside the fleet store', () => {
  jest.setTimeout(90_000);
  const dir = useTempDir('kreplay-ch-incidents-');
  const clickhouse = useClickHouse();
  let daemon: Daemon | null = null;
  afterEach(async () => {
    await daemon?.close();
    daemon = null;
  });

  it('serves an incident the fleet does not hold, and one it holds once, from the fleet', async () => {
    const url = `clickhouse://127.0.0.1:${clickhouse.server.httpPort}/incidents`;
    await migrateClickHouse(clickhouse.server.client('incidents'));
    mkdirSync(join(dir.path, 'incidents'));
    const inFleet = incidentEvents(200, 'in-fleet');
    const ticket = fromOtherStores(incidentEvents(150, 'ticket-only'));
    const shipped = join(dir.path, 'shipped.kri');
    writeIncident(shipped, inFleet);
    const ship = spawnSync(process.execPath, [KREPLAY_BIN, 'ship', '--from', shipped, '--to', url], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(ship.status).toBe(0);
    writeIncident(join(dir.path, 'incidents', 'in-fleet.kri'), inFleet);
    writeIncident(join(dir.path, 'incidents', 'ticket.kri'), ticket);

    daemon = await createDaemon({ dataDir: dir.path, store: url, log: silentLogger });
    const ids = async (txn: string) =>
      (await fetchAllPages(daemon!.url, `transaction_id=${txn}&limit=37`)).map((e) => e.event_id);
    expect(await ids('ticket-only')).toEqual(ticket.map((e) => e.event_id));
    expect(await ids('in-fleet')).toEqual(inFleet.map((e) => e.event_id));

    const created = await api(daemon.url, 'POST', '', { transaction_id: 'ticket-only' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ transaction_id: 'ticket-only', events_total: 150 });
    const fleet = await api(daemon.url, 'POST', '', { transaction_id: 'in-fleet' });
    expect(fleet.body).toMatchObject({ events_total: 200 });
  });
});
