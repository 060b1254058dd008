/**
 * Records one incident of a service the ordinary way and exports it as a file: an agent traces the
 * test's cgroup (its transactions only), the service starts inside it (writing its port to a file),
 * curl sends one traced request with the transaction's id, then the daemon finds the slow response
 * wait and exports the incident. The agent is stopped and its data removed before the replays.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '../../../core/log/logger';
import { createDaemon } from '../../../daemon/create-daemon';
import { startAgent } from '../agent-process';
import { runInCgroup, type TestCgroup } from '../cgroup';
import { waitFor } from '../wait';
import { kreplay } from './kreplay-run';

export interface RecordedIncident {
  /** the incident file (readable by any user) */
  file: string;
  /** the port the service listened on in production */
  servicePort: number;
  /** the slow response wait on `target`, in ns */
  waitNs: number;
  /**
   * the longest other response wait recorded on `target`, in ns (0 if none): what a loaded host made
   * a fast statement take in production, which a faithful replay holds too
   */
  otherWaitNs: number;
  /** the body curl got */
  reply: string;
}

export async function recordIncident(options: {
  dir: string;
  cgroup: TestCgroup;
  txn: string;
  /** the service's argv; it writes its port, then a newline, to `portFile` */
  service: (portFile: string) => string[];
  /** the peer whose slow response the incident is about, and the least wait to find there (ns) */
  target: string;
  minWaitNs: number;
  children: ChildProcess[];
}): Promise<RecordedIncident> {
  // a data dir of its own: an agent that failed to start in time may still hold another's
  const data = join(options.dir, `data-${options.txn}`);
  const agent = await startAgent(
    ['--data-dir', data, '--node', 'prod', '--cgroup-id', String(options.cgroup.id), '--filter-transactions'],
    // a machine shared with other builds may take long to load the probes
    60_000,
  );
  try {
    const portFile = join(options.dir, `${options.txn}.port`);
    const service = spawn(
      '/bin/sh',
      ['-c', `${options.cgroup.enter} "$@"`, 'sh', ...options.service(portFile)],
      { stdio: 'ignore' },
    );
    options.children.push(service);
    await waitFor(() => existsSync(portFile) && readFileSync(portFile, 'utf8').endsWith('\n'));
    const servicePort = Number(readFileSync(portFile, 'utf8').trim());
    const reply = await runInCgroup(options.cgroup, 'curl', [
      '-s',
      '-H',
      'traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      '-H',
      `x-request-id: ${options.txn}`,
      `http://127.0.0.1:${servicePort}/checkout`,
    ]);
    service.kill();
    const daemon = await createDaemon({ dataDir: data, log: silentLogger });
    try {
      // the target's response waits, longest first, once the slow one is stored
      const waits = await waitFor(
        async () => {
          const res = await fetch(
            `${daemon.url}/api/events?transaction_id=${options.txn}&event_type=sys_read&int64=string&limit=1000`,
          );
          const { events } = (await res.json()) as {
            events: { target: string | null; response_ns: string | null }[];
          };
          const found = events
            .filter((e) => e.target === options.target && e.response_ns !== null)
            .map((e) => Number(e.response_ns))
            .sort((a, b) => b - a);
          return found[0] !== undefined && found[0] >= options.minWaitNs ? found : undefined;
        },
        { what: `a response wait on ${options.target}` },
      );
      const [waitNs, otherWaitNs = 0] = waits as [number, number?];
      const file = join(options.dir, `${options.txn}.kri`);
      const exported = await kreplay([
        'export',
        options.txn,
        '--format',
        'incident',
        '-o',
        file,
        '--server',
        daemon.url,
      ]).done;
      if (exported.status !== 0) throw new Error(`export failed: ${exported.stderr}`);
      chmodSync(file, 0o644);
      return { file, servicePort, waitNs, otherWaitNs, reply };
    } finally {
      await daemon.close();
    }
  } finally {
    await agent.stop();
    rmSync(data, { recursive: true, force: true });
  }
}
