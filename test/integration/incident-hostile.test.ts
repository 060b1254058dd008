/**
 * Hostile files in the incidents folder: a FIFO named like an incident file, at start and while the
 * daemon runs, is skipped with its reason and blocks nothing (the port opens, the routes answer,
 * SIGTERM ends the daemon); a library that stops answering is refused by deadline and reported stuck.
 */
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startDaemonProcess, type DaemonProcess } from '../../bench/daemon-process';
import { silentLogger } from '../../core/log/logger';
import { IncidentWriter } from '../../core/incident';
import { IncidentThread } from '../../daemon/incidents/incident-thread';
import { incidentEvents } from '../support/incident-events';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';
import { HOUR_MS, useWallStep } from '../support/wall-step';

const dir = useTempDir('kreplay-incident-hostile-');
const daemons: DaemonProcess[] = [];
afterEach(async () => {
  for (const d of daemons.splice(0)) await d.stop();
});

function incidentBytes(txn: string, count = 50): Buffer {
  const writer = new IncidentWriter({
    transactionId: txn,
    source: 'node-stores',
    exportedAt: '2026-11-24T00:00:00.000Z',
  });
  for (const e of incidentEvents(count, txn)) writer.add(e);
  return writer.finish(null);
}

interface Listing {
  incidents: { file: string; transaction_id: string }[];
  skipped: { file: string; reason: string }[];
}

const listing = async (url: string) => (await (await fetch(`${url}/api/incidents`)).json()) as Listing;

describe('hostile files in the incidents folder', () => {
  it('a FIFO there at start: the daemon listens, serves the good file, skips the FIFO naming why, and stops on SIGTERM', async () => {
    const data = join(dir.path, 'at-start');
    mkdirSync(join(data, 'incidents'), { recursive: true });
    writeFileSync(join(data, 'incidents', 'good.kri'), incidentBytes('GOOD-1'));
    execFileSync('mkfifo', [join(data, 'incidents', 'x.kri')]);
    const daemon = await startDaemonProcess(['--data-dir', data], join(dir.path, 'at-start.log'));
    daemons.push(daemon);
    const body = await listing(daemon.url);
    expect(body.incidents.map((i) => i.transaction_id)).toEqual(['GOOD-1']);
    expect(body.skipped).toEqual([
      {
        file: join(data, 'incidents', 'x.kri'),
        reason: expect.stringMatching(/is a FIFO, not a regular file/),
      },
    ]);
    expect((await fetch(`${daemon.url}/readyz`)).status).toBe(200);
    const exited = once(daemon.child, 'exit');
    daemon.child.kill('SIGTERM');
    await exited;
    expect(daemon.child.exitCode).toBe(0);
  });

  it('a FIFO made while it runs: listing, upload and readiness go on', async () => {
    const data = join(dir.path, 'while-running');
    mkdirSync(join(data, 'incidents'), { recursive: true });
    const daemon = await startDaemonProcess(['--data-dir', data], join(dir.path, 'while-running.log'));
    daemons.push(daemon);
    execFileSync('mkfifo', [join(data, 'incidents', 'late.kri')]);
    const body = await listing(daemon.url);
    expect(body.skipped).toEqual([
      { file: join(data, 'incidents', 'late.kri'), reason: expect.stringMatching(/is a FIFO/) },
    ]);
    const upload = await fetch(`${daemon.url}/api/incidents`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: new Uint8Array(incidentBytes('UP-1')),
    });
    expect(upload.status).toBe(201);
    expect((await listing(daemon.url)).incidents.map((i) => i.transaction_id)).toEqual(['UP-1']);
    expect((await fetch(`${daemon.url}/readyz`)).status).toBe(200);
  });

  it('refuses a request the library has not answered by its deadline, and says it is stuck until it answers', async () => {
    const data = join(dir.path, 'deadline');
    mkdirSync(data, { recursive: true });
    // a deadline shorter than decoding this upload takes
    const library = new IncidentThread(data, silentLogger, 1);
    try {
      await library.listing().catch(() => undefined);
      const upload = library.upload(incidentBytes('BIG-1', 20_000));
      // read as the refusal lands: an answer the thread sends right after may be taken before the test resumes
      const stuckWhenRefused = upload.then(
        () => null,
        () => library.stuckForS(),
      );
      await expect(upload).rejects.toMatchObject({ kind: 'store-unavailable' });
      expect(await stuckWhenRefused).not.toBeNull();
      await waitFor(() => library.stuckForS() === null, { what: 'the library answering again' });
    } finally {
      await library.close();
    }
  });

  describe('under a wall clock step', () => {
    const wall = useWallStep();

    it('does not call a request it is still within its deadline for stuck when the clock steps an hour on', async () => {
      const data = join(dir.path, 'step');
      mkdirSync(data, { recursive: true });
      const library = new IncidentThread(data, silentLogger);
      try {
        await library.listing();
        const upload = library.upload(incidentBytes('STEP-1'));
        wall.step(HOUR_MS);
        const stuck = library.stuckForS();
        await expect(upload).resolves.toMatchObject({ transaction_id: 'STEP-1' });
        expect(stuck).toBeNull();
      } finally {
        await library.close();
      }
    });
  });
});
