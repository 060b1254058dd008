/**
 * GET /metrics: the daemon in the Prometheus text format (prom-client), one
 * registry per daemon. Every metric name is made here.
 */
import { Counter, Gauge, Registry } from 'prom-client';
import type { TimingObserver } from '../replay/sessions/replay-session';
import type { PoolStats, QueryTiming } from '../queries/query-pool';
import type { ReplaySessions } from '../replay/sessions/session-service';
import { CountedHistogram } from './counted-histogram';
import { LabelledHistogram } from './labelled-histogram';
import { SESSION_STATES } from '../replay/sessions/session-state';
import { LATENESS_BOUNDS_S } from '../replay/timing-stats';

/** A finished request, as the request log sees it. */
export interface RequestDone {
  method: string;
  route: string | null;
  status: number;
  duration_ms: number;
}

/** The replay clock counts its releases in these buckets: requests are timed in the same. */
const SECONDS_BUCKETS = [...LATENESS_BOUNDS_S];

export class DaemonMetrics {
  readonly registry = new Registry();
  /** the requests' durations, and their count by the same labels: LabelledHistogram's, not prom-client's */
  private readonly requests: LabelledHistogram<{ method: string; route: string; status: string }>;
  /** added to in aggregate, from the counts the replay clock keeps: CountedHistogram's, not prom-client's */
  private readonly release: CountedHistogram;
  private readonly delivery: CountedHistogram;
  private readonly queryWait: LabelledHistogram<{ op: string }>;
  private readonly queryRun: LabelledHistogram<{ op: string }>;

  constructor() {
    this.requests = new LabelledHistogram(
      'kreplay_http_request_duration_seconds',
      'time from a request to its last byte (a stream: to its end)',
      ['method', 'route', 'status'],
      SECONDS_BUCKETS,
      this.registry,
      {
        name: 'kreplay_http_requests_total',
        help: 'HTTP requests answered, by method, route template (none: no route matched) and status',
      },
    );
    this.release = new CountedHistogram(
      'kreplay_replay_release_lateness_seconds',
      'how late the replay clock released each event against its schedule',
      SECONDS_BUCKETS,
      this.registry,
    );
    this.delivery = new CountedHistogram(
      'kreplay_replay_delivery_lateness_seconds',
      "how late each replayed event was written to its watchers' sockets against its schedule",
      SECONDS_BUCKETS,
      this.registry,
    );
    this.queryWait = new LabelledHistogram(
      'kreplay_query_wait_seconds',
      "time a query (an events page, a replay's read) waited for a free query worker, by operation",
      ['op'],
      SECONDS_BUCKETS,
      this.registry,
    );
    this.queryRun = new LabelledHistogram(
      'kreplay_query_run_seconds',
      'time from a query worker taking a query to its answer on the main thread, by operation',
      ['op'],
      SECONDS_BUCKETS,
      this.registry,
    );
  }

  /** A query the workers answered: its wait for one, then its run. */
  query(timing: QueryTiming): void {
    this.queryWait.observe({ op: timing.op }, timing.waitSeconds);
    this.queryRun.observe({ op: timing.op }, timing.runSeconds);
  }

  request(done: RequestDone): void {
    this.requests.observe(
      { method: done.method, route: done.route ?? 'none', status: String(done.status) },
      done.duration_ms / 1000,
    );
  }

  readonly timing: TimingObserver = {
    released: (delta) => this.release.add(delta),
    delivered: (delta) => this.delivery.add(delta),
  };

  /** Sessions per state and SSE watchers, read at each scrape. */
  watchSessions(replay: ReplaySessions): void {
    new Gauge({
      name: 'kreplay_replay_sessions',
      help: 'replay sessions by state',
      labelNames: ['state'],
      registers: [this.registry],
      collect() {
        const counts = new Map<string, number>(SESSION_STATES.map((s) => [s, 0]));
        for (const session of replay.list()) counts.set(session.state, counts.get(session.state)! + 1);
        for (const [state, n] of counts) this.set({ state }, n);
      },
    });
    new Gauge({
      name: 'kreplay_sse_watchers',
      help: 'open Server-Sent Events streams of replay sessions',
      registers: [this.registry],
      collect() {
        this.set(replay.list().reduce((sum, session) => sum + session.watchers, 0));
      },
    });
  }

  /** Event streams cut for falling behind, read at each scrape. */
  watchStreams(streams: { readonly cuts: number }): void {
    new Counter({
      name: 'kreplay_sse_streams_cut_total',
      help: "event streams cut because their client fell behind the stream's send buffer bound (it may resume with Last-Event-ID)",
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(streams.cuts);
      },
    });
  }

  /** The query workers: queue depth, busy workers and their busy time, read at each scrape. */
  watchQueries(stats: () => PoolStats): void {
    this.gauge('kreplay_query_queue_depth', 'queries waiting for a free query worker', () => stats().queued);
    this.gauge('kreplay_query_workers_busy', 'query workers running a query now', () => stats().busy);
    new Counter({
      name: 'kreplay_query_worker_busy_seconds_total',
      help: 'time the query workers have spent running queries, summed over workers',
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(stats().busySeconds);
      },
    });
  }

  /** A gauge read at each scrape. */
  private gauge(name: string, help: string, read: () => number): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  }
}
