/**
 * The daemon gives memory back after load: an SSE storm (5,000 connections, 1,024 streams taken)
 * grows its RSS; once the streams close, the heap's free pages go back to the kernel and RSS comes
 * back near where it was, not left at the peak.
 */
import { readFileSync } from 'node:fs';
import { request, Agent, type ClientRequest } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDaemonProcess, type DaemonProcess } from '../../bench/daemon-process';
import { writeStore } from '../support/event-store';
import { waitFor } from '../support/wait';

const T0 = 1_795_345_678_123_456_789n;
const rssMiB = (pid: number) =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

let dir = '';
let daemon: DaemonProcess;
afterAll(async () => {
  await daemon?.stop();
  rmSync(dir, { recursive: true, force: true });
});

it('gives the memory of an SSE storm back once its streams close', async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-memory-'));
  writeStore(dir, 'n1', [
    { ts: T0, txn: 'tx' },
    { ts: T0 + 60_000_000_000n, txn: 'tx' },
  ]);
  daemon = await startDaemonProcess(
    ['--data-dir', dir, '--max-streams', '1024', '--max-streams-per-client', '100000'],
    join(dir, 'daemon.log'),
  );
  const pid = daemon.child.pid!;
  const created = await fetch(`${daemon.url}/api/replay/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ transaction_id: 'tx' }),
  });
  const path = `/api/replay/sessions/${((await created.json()) as { id: string }).id}/events`;
  const idle = rssMiB(pid);
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
  const open: ClientRequest[] = [];
  await Promise.all(
    Array.from(
      { length: 5000 },
      () =>
        new Promise<void>((resolve) => {
          const req = request(`${daemon.url}${path}`, { agent }, (res) => {
            if (res.statusCode !== 200) res.resume();
            resolve();
          });
          req.on('error', () => resolve());
          req.end();
          open.push(req);
        }),
    ),
  );
  const peak = rssMiB(pid);
  for (const req of open) req.destroy();
  const grew = peak - idle;
  // back to within a third of what the storm took (malloc_trim after the last stream closed)
  const after = await waitFor(() => rssMiB(pid) <= idle + grew / 3 && rssMiB(pid), {
    timeoutMs: 20_000,
    what: () =>
      `RSS back near ${idle.toFixed(0)} MiB (it is ${rssMiB(pid).toFixed(0)}, the storm took it to ${peak.toFixed(0)})`,
  });
  process.stdout.write(
    `SSE storm: RSS ${idle.toFixed(0)} MiB idle, ${peak.toFixed(0)} at the peak, ${after.toFixed(0)} after\n`,
  );
}, 120_000);
