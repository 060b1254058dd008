/** GET /metrics: Prometheus text whose counters move with what the daemon did. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import { createDaemon, type Daemon } from '../../daemon/create-daemon';
import { writeStore } from '../support/event-store';
import { StreamClient } from '../support/replay-http';
import { waitFor } from '../support/wait';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-metrics-');
const T0 = 1_795_345_678_000_000_000n;

/** The value of one sample line, e.g. `kreplay_http_requests_total{method="GET",…}`. */
function sample(text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ''} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('daemon metrics', () => {
  let daemon: Daemon | undefined;
  afterEach(async () => {
    await daemon?.close();
    daemon = undefined;
  });

  it('counts requests per route and status, sessions per state, and each replayed event’s lateness', async () => {
    writeStore(
      dir.path,
      'n1',
      Array.from({ length: 5 }, (_, i) => ({ ts: T0 + BigInt(i) * 1_000_000n, txn: 'tx1' })),
    );
    daemon = await createDaemon({ dataDir: dir.path, log: silentLogger });
    const url = daemon.url;
    const scrape = async () => {
      const res = await fetch(`${url}/metrics`);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      return res.text();
    };
    const before = await scrape();
    expect(sample(before, 'kreplay_replay_sessions', 'state="ready"')).toBe(0);
    await fetch(`${url}/api/events`);
    await fetch(`${url}/api/events?transaction_id=tx1`);
    await fetch(`${url}/api/events?limit=0`);
    await fetch(`${url}/no/such`);
    const created = await fetch(`${url}/api/replay/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ transaction_id: 'tx1', speed_factor: 10 }),
    });
    const id = ((await created.json()) as { id: string }).id;
    const stream = await StreamClient.open(url, id);
    await fetch(`${url}/api/replay/sessions/${id}/play`, { method: 'POST' });
    await stream.until((s) => s.states().includes('finished'));
    expect(sample(await scrape(), 'kreplay_sse_watchers')).toBe(1);
    stream.close();
    // the daemon notices the client gone on its next read of the socket
    const after = await waitFor(async () => {
      const text = await scrape();
      return sample(text, 'kreplay_sse_watchers') === 0 && text;
    });
    expect(
      sample(after, 'kreplay_http_requests_total', 'method="GET",route="/api/events",status="200"'),
    ).toBe(2);
    expect(
      sample(after, 'kreplay_http_requests_total', 'method="GET",route="/api/events",status="400"'),
    ).toBe(1);
    expect(sample(after, 'kreplay_http_requests_total', 'method="GET",route="none",status="404"')).toBe(1);
    expect(
      sample(
        after,
        'kreplay_http_request_duration_seconds_count',
        'method="GET",route="/api/events",status="200"',
      ),
    ).toBe(2);
    expect(sample(after, 'kreplay_replay_sessions', 'state="finished"')).toBe(1);
    expect(sample(after, 'kreplay_replay_release_lateness_seconds_count')).toBe(5);
    expect(sample(after, 'kreplay_replay_delivery_lateness_seconds_count')).toBe(5);
    // every event is at most +Inf late, and the sum is the lateness the stream told of each event
    expect(sample(after, 'kreplay_replay_release_lateness_seconds_bucket', 'le="+Inf"')).toBe(5);
    const toldLateNs = stream
      .replays()
      .reduce((sum, m) => sum + Number(JSON.parse(m.data).emitted_late_ns), 0);
    expect(sample(after, 'kreplay_replay_release_lateness_seconds_sum')).toBeCloseTo(toldLateNs / 1e9, 6);
    expect(sample(after, 'kreplay_sse_watchers')).toBe(0);
    expect(
      sample(after, 'kreplay_http_requests_total', 'method="GET",route="/metrics",status="200"'),
    ).toBeGreaterThan(2);
  });

  it('needs a read token under --tokens, as every read does', async () => {
    writeStore(dir.path, 'n1', [{ ts: T0, txn: 'tx1' }]);
    const tokens = join(dir.path, 'tokens');
    writeFileSync(tokens, 'read-token-0123456789abcdef read grafana\n');
    daemon = await createDaemon({ dataDir: dir.path, log: silentLogger, tokensFile: tokens });
    expect((await fetch(`${daemon.url}/metrics`)).status).toBe(401);
    const ok = await fetch(`${daemon.url}/metrics`, {
      headers: { authorization: 'Bearer read-token-0123456789abcdef' },
    });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('# TYPE kreplay_http_requests_total counter');
  });
});
