/**
 * The daemon's latency while it plays, taken by a process of its own
 * (bench/replay-data.ts's pollDaemon starts it): GET /healthz and an event
 * page in turn, every EVERY_MS, until its stdin closes; then one JSON line
 * of the latencies (ms). Measured in the bench's own process, its
 * scavenges (20–45 ms there, what the bench kept alive) counted in the
 * daemon's answers and took a core from the play (issue 48). This process
 * keeps nothing but two arrays of numbers, on one kept-alive connection.
 *
 *   node dist/bench/replay-poller.js URL EVERY_MS LOOKUPS
 */
import { Agent, get } from 'node:http';

export interface PollResult {
  health: number[];
  lookup: number[];
}

const agent = new Agent({ keepAlive: true, maxSockets: 1 });

/** ms from the request to its body's end; a status other than 200 fails the run */
function msToAnswer(url: string): Promise<number> {
  const t = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    get(url, { agent }, (res) => {
      res.on('data', () => {});
      res.once('end', () =>
        res.statusCode === 200
          ? resolve(Number(process.hrtime.bigint() - t) / 1e6)
          : reject(new Error(`${url}: ${res.statusCode}`)),
      );
      res.once('error', reject);
    }).once('error', reject);
  });
}

async function main(): Promise<void> {
  const [url, everyMs, lookups] = [process.argv[2]!, Number(process.argv[3]), Number(process.argv[4])];
  let done = false;
  process.stdin.once('end', () => (done = true)).resume();
  const result: PollResult = { health: [], lookup: [] };
  for (let i = 0; !done; i++) {
    result.health.push(await msToAnswer(`${url}/healthz`));
    result.lookup.push(await msToAnswer(`${url}/api/events?transaction_id=lookup-${i % lookups}`));
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
  agent.destroy();
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
