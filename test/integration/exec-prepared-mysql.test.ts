/**
 * Issue 42 on MariaDB (apt `mariadb-server`, one server for the file): a slow `SELECT SLEEP(1.5)`
 * recorded from two ordinary services, replayed as uid 65534 against the same database answering at
 * once (SLEEP(0.001)).
 * - npm `mysql2` through a pool with prepared statements (pool.execute(): every COM_STMT_EXECUTE
 *   once had one key, the command number, so a build that skipped the slow query passed with a fast
 *   one held in its stead): a build that skips it is "not reproduced", with and without --strict; a
 *   health probe (a statement the incident never ran) first, or a warm-up connection before the
 *   pool's, leaves the fast statements un-held and the slow one held as recorded; --strict passes a
 *   faithful build whose JSON reply carries other bytes (a timing, the SLEEP's argument), reporting
 *   the difference. The same with the text protocol (pool.query(), whose statements were always
 *   keyed by their text).
 * - PyMySQL from a worker thread, a connection per call: a health probe's connection first (once
 *   beyond the recorded connections, so never relayed, and the order's query never held) replays
 *   as recorded; skipping the slow query is "not reproduced".
 */
import { join } from 'node:path';
import { startMariaDb, type MariaDb } from '../support/exec/mariadb';
import { recordIncident, type RecordedIncident } from '../support/exec/record-incident';
import {
  CI_TOLERANCE,
  notReproduced,
  replayBuild,
  slowCause,
  replySaid,
  slowOneHeld,
  useReplayWorkspace,
  type Replayed,
} from '../support/exec/replay-build';

const NODE_SERVICE = join(__dirname, '../support/exec/mysql-service.js');
const PY_SERVICE = join(__dirname, '../support/exec/sql-service.py');
const PYTHON = '/usr/bin/python3';

let db: MariaDb | null = null;
const ws = useReplayWorkspace('prepared-mysql', () => db?.stop());
let dbTarget: string;

beforeAll(async () => {
  db = await startMariaDb();
  dbTarget = `tcp 127.0.0.1:${db.port}`;
  db.sql(
    'CREATE DATABASE shop; CREATE TABLE shop.orders (id INT PRIMARY KEY, total DECIMAL(10,2), n INT); INSERT INTO shop.orders VALUES (42, 99.5, 0)',
  );
}, 120_000);

const replay = (incident: RecordedIncident, name: string, build: string[], ...flags: string[]) =>
  replayBuild({ dir: ws.dir, incident, name, build, flags, target: dbTarget });
const heldAsRecorded = (run: Replayed, incident: RecordedIncident) => slowOneHeld(run, incident, dbTarget);

describe.each(['execute', 'query'])('mysql2 through a pool, pool.%s()', (api) => {
  let incident: RecordedIncident;
  const build = (...flags: string[]) => [
    process.execPath,
    NODE_SERVICE,
    'once',
    String(db!.port),
    '--listen',
    String(incident.servicePort),
    '--api',
    api,
    ...flags,
  ];

  beforeAll(async () => {
    incident = await recordIncident({
      ...ws,
      txn: `mysql2-${api}-${process.pid}`,
      service: (portFile) => [
        process.execPath,
        NODE_SERVICE,
        'serve',
        String(db!.port),
        portFile,
        '--api',
        api,
      ],
      target: dbTarget,
      minWaitNs: 1.4e9,
    });
    expect(JSON.parse(incident.reply)).toEqual(expect.objectContaining({ slept: 1.5 }));
  }, 120_000);

  it('a build that skips the slow statement is never passed, with or without --strict', async () => {
    for (const strict of [[], ['--strict', ...CI_TOLERANCE]]) {
      const skipped = await replay(
        incident,
        `${api}-skipped${strict.length > 0 ? '-strict' : ''}`,
        build('--skip-slow'),
        ...strict,
      );
      notReproduced(skipped);
      expect(slowCause(skipped.report, dbTarget, 1.4e9)).toEqual(
        expect.objectContaining({
          exercised: false,
          reason: expect.stringContaining('a different request') as string,
        }),
      );
      // the fast statements took their own exchanges, not the slow one's
      expect(skipped.times.update).toBeLessThan(0.5);
      expect(skipped.times.total).toBeLessThan(0.5);
    }
  }, 60_000);

  it('a health probe first, or a warm-up connection before the pool, leaves the fast statements fast and holds the slow one', async () => {
    heldAsRecorded(await replay(incident, `${api}-probe`, build('--probe')), incident);
    const warm = await replay(incident, `${api}-warm`, build('--warm-up'));
    heldAsRecorded(warm, incident);
    // the warm-up's connection, beyond the recorded one, was relayed and passed through un-held
    expect(warm.report.targets.find((r) => r.call === 'connect' && r.target === dbTarget)).toEqual(
      expect.objectContaining({ matched: 1, passed_through: 1 }),
    );
  }, 60_000);

  it('--strict passes a faithful build whose reply carries other bytes, and says how they differ', async () => {
    const faithful = await replay(incident, `${api}-strict`, build(), '--strict', ...CI_TOLERANCE);
    heldAsRecorded(faithful, incident);
    expect(faithful.row).toEqual(expect.objectContaining({ passed_through: 0, ambiguous: 0 }));
    replySaid(faithful, incident.servicePort);
  }, 60_000);
});

describe('PyMySQL, a connection per call', () => {
  let incident: RecordedIncident;
  const build = (...flags: string[]) => [PYTHON, PY_SERVICE, 'mysql', 'once', String(db!.port), ...flags];

  beforeAll(async () => {
    incident = await recordIncident({
      ...ws,
      txn: `pymysql-checkout-${process.pid}`,
      service: (portFile) => [PYTHON, PY_SERVICE, 'mysql', 'serve', String(db!.port), portFile],
      target: dbTarget,
      minWaitNs: 1.4e9,
    });
  }, 120_000);

  it("a health probe's connection first replays as recorded; a warm-up too; skipping the slow query is not reproduced", async () => {
    heldAsRecorded(await replay(incident, 'pymysql-probe', build('--probe')), incident);
    heldAsRecorded(await replay(incident, 'pymysql-warm', build('--warm-up')), incident);
    const skipped = await replay(
      incident,
      'pymysql-skipped',
      build('--skip-slow'),
      '--strict',
      ...CI_TOLERANCE,
    );
    notReproduced(skipped);
  }, 60_000);
});
