import { Counter, Histogram, Registry } from 'prom-client';
import { CountedHistogram } from '../../daemon/metrics/counted-histogram';
import { DaemonMetrics, type RequestDone } from '../../daemon/metrics/daemon-metrics';
import { LATENESS_BOUNDS_S } from '../../daemon/replay/timing-stats';

const buckets = [...LATENESS_BOUNDS_S];

/** The daemon's metrics as prom-client's own Counter and Histograms exported them, in the same order. */
function reference(): {
  registry: Registry;
  request(done: RequestDone): void;
  query(op: string, wait: number, run: number): void;
} {
  const registry = new Registry();
  const registers = [registry];
  const labelNames = ['method', 'route', 'status'] as const;
  const requests = new Counter({
    name: 'kreplay_http_requests_total',
    help: 'HTTP requests answered, by method, route template (none: no route matched) and status',
    labelNames,
    registers,
  });
  const duration = new Histogram({
    name: 'kreplay_http_request_duration_seconds',
    help: 'time from a request to its last byte (a stream: to its end)',
    labelNames,
    buckets,
    registers,
  });
  new CountedHistogram(
    'kreplay_replay_release_lateness_seconds',
    'how late the replay clock released each event against its schedule',
    buckets,
    registry,
  );
  new CountedHistogram(
    'kreplay_replay_delivery_lateness_seconds',
    "how late each replayed event was written to its watchers' sockets against its schedule",
    buckets,
    registry,
  );
  const wait = new Histogram({
    name: 'kreplay_query_wait_seconds',
    help: "time a query (an events page, a replay's read) waited for a free query worker, by operation",
    labelNames: ['op'],
    buckets,
    registers,
  });
  const run = new Histogram({
    name: 'kreplay_query_run_seconds',
    help: 'time from a query worker taking a query to its answer on the main thread, by operation',
    labelNames: ['op'],
    buckets,
    registers,
  });
  return {
    registry,
    request: (done) => {
      const labels = { method: done.method, route: done.route ?? 'none', status: String(done.status) };
      requests.inc(labels);
      duration.observe(labels, done.duration_ms / 1000);
    },
    query: (op, waitSeconds, runSeconds) => {
      wait.observe({ op }, waitSeconds);
      run.observe({ op }, runSeconds);
    },
  };
}

describe('the daemon’s request and query metrics', () => {
  it("export what prom-client's Counter and Histograms exported, with no prom-client call per request", async () => {
    const ours = new DaemonMetrics();
    const theirs = reference();
    const last = buckets[buckets.length - 1]!;
    const requests: RequestDone[] = [
      { method: 'GET', route: '/healthz', status: 200, duration_ms: 0.3 },
      { method: 'GET', route: '/api/events', status: 200, duration_ms: 1000 * buckets[2]! },
      { method: 'GET', route: '/healthz', status: 200, duration_ms: 1000 * (last + 1) },
      { method: 'GET', route: null, status: 404, duration_ms: 0 },
      { method: 'POST', route: '/api/replay/sessions', status: 201, duration_ms: 12.5 },
      { method: 'GET', route: '/api/events', status: 400, duration_ms: 0.01 },
      { method: 'GET', route: '/healthz', status: 200, duration_ms: 7 },
    ];
    const queries: [string, number, number][] = [
      ['list', 0.0001, 0.002],
      ['transactionFrames', 0, 0.05],
      ['list', 0.3, last * 2],
    ];
    for (let round = 0; round < 3; round++) {
      for (const done of requests) ours.request(done);
      for (const [op, waitSeconds, runSeconds] of queries)
        ours.query({ op: op as never, waitSeconds, runSeconds });
    }
    // none is prom-client's labelled Counter or Histogram: each of their calls hashes and checks its labels
    for (const name of [
      'kreplay_http_requests_total',
      'kreplay_http_request_duration_seconds',
      'kreplay_query_wait_seconds',
      'kreplay_query_run_seconds',
    ]) {
      const metric = ours.registry.getSingleMetric(name);
      expect(metric).toBeDefined();
      expect(metric instanceof Counter || metric instanceof Histogram).toBe(false);
    }
    for (let round = 0; round < 3; round++) {
      for (const done of requests) theirs.request(done);
      for (const [op, waitSeconds, runSeconds] of queries) theirs.query(op, waitSeconds, runSeconds);
    }
    expect(await ours.registry.metrics()).toBe(await theirs.registry.metrics());
  });

  it('export only their names before the first request', async () => {
    expect(await new DaemonMetrics().registry.metrics()).toBe(await reference().registry.metrics());
  });
});
