/**
 * Issue 42 on PostgreSQL (apt `postgresql`, one cluster for the file): a slow `pg_sleep(1.5)`
 * recorded from two ordinary services, replayed as uid 65534 against the same database answering at
 * once (pg_sleep(0)).
 * - npm `pg` through a Pool, every statement a named prepared statement (parameterised: Parse, Bind,
 *   Describe, Execute, Sync in one write the first time on a connection, a Bind of the name alone
 *   after): a build that skips the slow one is "not reproduced", with and without --strict; a health
 *   statement first, or a warm-up connection before the pool's (once beyond the recorded
 *   connections, so never relayed), leave the fast statements un-held and the slow one held as
 *   recorded; --strict passes a faithful build whose reply carries other bytes.
 * - psycopg2 from a worker thread, a connection per call (simple Query): a health probe's
 *   connection first replays as recorded; skipping the slow query is "not reproduced".
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { startPostgres, type Postgres } from '../support/exec/postgres';
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

const NODE_SERVICE = join(__dirname, '../support/exec/pg-prepared-service.js');
const PY_SERVICE = join(__dirname, '../support/exec/sql-service.py');
const PYTHON = '/usr/bin/python3';

let postgres: Postgres | null = null;
const ws = useReplayWorkspace('prepared-postgres', () => postgres?.stop());
let pgTarget: string;

beforeAll(async () => {
  postgres = await startPostgres();
  pgTarget = `tcp 127.0.0.1:${postgres.port}`;
  execFileSync('psql', [
    '-X',
    '-q',
    '-v',
    'ON_ERROR_STOP=1',
    '-d',
    postgres.url,
    '-c',
    'CREATE TABLE orders (id int PRIMARY KEY, total numeric, n int); INSERT INTO orders VALUES (42, 99.5, 0)',
  ]);
}, 120_000);

const replay = (incident: RecordedIncident, name: string, build: string[], ...flags: string[]) =>
  replayBuild({ dir: ws.dir, incident, name, build, flags, target: pgTarget });
const heldAsRecorded = (run: Replayed, incident: RecordedIncident) => slowOneHeld(run, incident, pgTarget);
const record = (txn: string, service: (portFile: string) => string[]) =>
  recordIncident({ ...ws, txn, service, target: pgTarget, minWaitNs: 1.4e9 });

describe('pg through a Pool, named prepared statements', () => {
  let incident: RecordedIncident;
  const build = (...flags: string[]) => [
    process.execPath,
    NODE_SERVICE,
    'once',
    String(postgres!.port),
    '--listen',
    String(incident.servicePort),
    ...flags,
  ];

  beforeAll(async () => {
    incident = await record(`pg-named-${process.pid}`, (portFile) => [
      process.execPath,
      NODE_SERVICE,
      'serve',
      String(postgres!.port),
      portFile,
    ]);
  }, 120_000);

  it('a build that skips the slow statement is never passed, with or without --strict', async () => {
    for (const strict of [[], ['--strict', ...CI_TOLERANCE]]) {
      const skipped = await replay(
        incident,
        `pg-skipped${strict.length > 0 ? '-strict' : ''}`,
        build('--skip-slow'),
        ...strict,
      );
      notReproduced(skipped);
      expect(slowCause(skipped.report, pgTarget, 1.4e9)).toEqual(
        expect.objectContaining({ exercised: false }),
      );
      expect(skipped.times.update).toBeLessThan(0.5);
      expect(skipped.times.total).toBeLessThan(0.5);
    }
  }, 60_000);

  it('a health statement first, or a warm-up connection, leaves the fast statements fast and holds the slow one', async () => {
    heldAsRecorded(await replay(incident, 'pg-probe', build('--probe')), incident);
    const warm = await replay(incident, 'pg-warm', build('--warm-up'));
    heldAsRecorded(warm, incident);
    expect(warm.report.targets.find((r) => r.call === 'connect' && r.target === pgTarget)).toEqual(
      expect.objectContaining({ matched: 1, passed_through: 1 }),
    );
  }, 60_000);

  it('--strict passes a faithful build whose reply carries other bytes', async () => {
    const faithful = await replay(incident, 'pg-strict', build(), '--strict', ...CI_TOLERANCE);
    heldAsRecorded(faithful, incident);
    // every statement, the second update a Bind of its name alone, took its own exchange
    expect(faithful.row).toEqual(expect.objectContaining({ passed_through: 0, ambiguous: 0 }));
    replySaid(faithful, incident.servicePort);
  }, 60_000);
});

describe('psycopg2, a connection per call', () => {
  let incident: RecordedIncident;
  const build = (...flags: string[]) => [PYTHON, PY_SERVICE, 'pg', 'once', String(postgres!.port), ...flags];

  beforeAll(async () => {
    incident = await record(`psycopg2-${process.pid}`, (portFile) => [
      PYTHON,
      PY_SERVICE,
      'pg',
      'serve',
      String(postgres!.port),
      portFile,
    ]);
  }, 120_000);

  it("a health probe's connection first replays as recorded; a warm-up too; skipping the slow query is not reproduced", async () => {
    heldAsRecorded(await replay(incident, 'psycopg2-probe', build('--probe')), incident);
    heldAsRecorded(await replay(incident, 'psycopg2-warm', build('--warm-up')), incident);
    const skipped = await replay(
      incident,
      'psycopg2-skipped',
      build('--skip-slow'),
      '--strict',
      ...CI_TOLERANCE,
    );
    notReproduced(skipped);
  }, 60_000);
});
