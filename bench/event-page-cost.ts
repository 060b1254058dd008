/**
 * What one small event page costs the daemon, against a `/healthz` (the same request path with no
 * store behind it): the real `kreplay daemon` on a data dir of 100 small transactions, asked one
 * request at a time on one kept-alive connection (a lookup page `GET
 * /api/events?transaction_id=lookup-N`, or `/healthz`), after 300 to warm it up. Per request:
 * the daemon's CPU (every thread: its /proc stat), its main thread's (schedstat) and the wall time
 * at the client. KREPLAY_BENCH_ROOT names another checkout whose daemon is measured in the same
 * run, runs alternated (other, this, this, other, ...), so that two builds compare on one host.
 *
 *   node dist/bench/event-page-cost.js [runs=4] [requests=4000]
 */
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StoreWriter } from '../agent/store/store-writer';
import { repoRoot } from '../core/repo-root';
import { startDaemonProcess } from './daemon-process';
import { LOOKUPS, quantile, writeLookupTransactions } from './replay-data';
import { cpuUs } from './server-load';
import { printTable } from './table';
import { schedSince, schedStat } from './thread-schedstat';

const WARM_UP = 300;
const log = (msg: string) => process.stderr.write(`[bench:event-page-cost] ${msg}\n`);

interface PerRequest {
  processUs: number;
  mainUs: number;
  wallUs: number;
}

async function measure(
  url: string,
  pid: number,
  path: (i: number) => string,
  n: number,
): Promise<PerRequest> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const get = (i: number) =>
    new Promise<void>((resolve, reject) => {
      http
        .get(url + path(i), { agent }, (res) => {
          if (res.statusCode !== 200) reject(new Error(`${path(i)}: HTTP ${res.statusCode}`));
          res.resume();
          res.on('end', resolve);
        })
        .on('error', reject);
    });
  try {
    for (let i = 0; i < WARM_UP; i++) await get(i);
    const main = schedStat(pid);
    const cpu = cpuUs(pid);
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await get(i);
    const wallNs = Number(process.hrtime.bigint() - t0);
    const mainNs = main ? schedSince(main, schedStat(pid) ?? main).runNs : NaN;
    return {
      processUs: (cpuUs(pid) - cpu) / n,
      mainUs: mainNs / n / 1e3,
      wallUs: wallNs / n / 1e3,
    };
  } finally {
    agent.destroy();
  }
}

async function main(): Promise<void> {
  const runs = Number(process.argv[2] ?? 4);
  const requests = Number(process.argv[3] ?? 4000);
  const here = repoRoot();
  const other = process.env.KREPLAY_BENCH_ROOT;
  const trees = other && other !== here ? [other, here] : [here];
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-bench-page-'));
  const results = new Map<string, { page: PerRequest[]; healthz: PerRequest[] }>(
    trees.map((t) => [t, { page: [], healthz: [] }]),
  );
  try {
    const writer = StoreWriter.open(dir, 'n1');
    writeLookupTransactions(writer);
    writer.close();
    for (let run = 0; run < runs; run++) {
      // other, this, this, other, ...: neither tree always runs first
      const order = run % 2 === 0 ? trees : [...trees].reverse();
      for (const tree of order) {
        const daemon = await startDaemonProcess(['--data-dir', dir], join(dir, `daemon-${run}.log`), tree);
        try {
          const pid = daemon.child.pid!;
          const result = results.get(tree)!;
          result.page.push(
            await measure(
              daemon.url,
              pid,
              (i) => `/api/events?transaction_id=lookup-${i % LOOKUPS}`,
              requests,
            ),
          );
          result.healthz.push(await measure(daemon.url, pid, () => '/healthz', requests));
          log(`run ${run + 1}/${runs} ${tree}: page ${result.page.at(-1)!.processUs.toFixed(0)} µs of CPU`);
        } finally {
          await daemon.stop();
        }
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const range = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    return `${sorted[0]!.toFixed(0)}–${sorted.at(-1)!.toFixed(0)} (${quantile(sorted, 0.5).toFixed(0)})`;
  };
  const rows: string[][] = [];
  for (const [tree, { page, healthz }] of results)
    for (const [what, xs] of [
      ['event page', page],
      ['/healthz', healthz],
    ] as const)
      rows.push([
        tree,
        what,
        range(xs.map((x) => x.processUs)),
        range(xs.map((x) => x.mainUs)),
        range(xs.map((x) => x.wallUs)),
      ]);
  printTable(
    `event-page-cost: ${runs} runs of ${requests} requests a tree, one at a time; µs a request, range (median)`,
    rows,
    ['tree', 'request', 'daemon CPU', 'its main thread', 'wall at the client'],
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
