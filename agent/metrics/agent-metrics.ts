/**
 * The agent's Prometheus metrics: every name, label and bucket is here. Counters are not counted
 * a second time: each scrape reads the agent's own totals (agent/status.ts, the store's shared
 * counters, the kernel's per-CPU counters) once, and the collect functions copy them.
 */
import {
  collectDefaultMetrics,
  Counter,
  exponentialBuckets,
  Gauge,
  Histogram,
  Registry,
  type CounterConfiguration,
} from 'prom-client';
import type { CounterSnapshot } from '../status';
import type { EventType } from '../../core/model';
import type { ShipStatus } from '../ship/shipper';
import type { OtlpStatus } from '../otlp/otlp-exporter';
import { HOOK_OUTCOMES, RUNTIMES, runtimeHookKey } from '../runtimes/discovery/runtime-hook';

/** What a scrape reads from the running agent. */
export interface AgentReadings {
  counters(): CounterSnapshot;
  /** peak share of the ring holding unread records since the previous scrape, 0..1, or -1 if unknown */
  ringPeakFill(): number;
  /** the store file and its WAL */
  storeBytes(): number;
  /** half the bracket of the latest CLOCK_REALTIME − CLOCK_BOOTTIME sample */
  clockErrorNs(): number;
  ship(): ShipStatus | undefined;
  otlp(): OtlpStatus | undefined;
}

type Key = keyof CounterSnapshot;

const EVENTS_BY_TYPE: Record<EventType, Key> = {
  sys_write: 'sysWriteEmitted',
  sys_read: 'sysReadEmitted',
  sys_fsync: 'sysFsyncEmitted',
  sys_connect: 'sysConnectEmitted',
  block_io: 'blockIoEmitted',
};
const RECORDS_BY_KIND: Record<string, Key> = { context: 'contextEmitted', target: 'targetEmitted' };
/** everything lost, by where it was lost (records for the ring and tables, events for the store) */
const DROPS_BY_REASON: Record<string, Key> = {
  sys_write_ring_full: 'sysWriteDropped',
  sys_read_ring_full: 'sysReadDropped',
  sys_fsync_ring_full: 'sysFsyncDropped',
  sys_connect_ring_full: 'sysConnectDropped',
  block_io_ring_full: 'blockIoDropped',
  context_ring_full: 'contextDropped',
  target_ring_full: 'targetDropped',
  thread_entry_lost: 'threadEntryLost',
  request_table_full: 'requestTableFull',
  connect_table_full: 'connectTableFull',
  corrupt_record: 'corruptRecords',
  disk_full: 'diskFullDropped',
  store_error: 'storeErrorDropped',
};
/** attribution that could not be made: the events are stored, without (all of) their context */
const CONTEXT_PROBLEMS_BY_KIND: Record<string, Key> = {
  malformed_marker: 'malformedMarkers',
  incomplete_request_head: 'incompleteRequestHeads',
  untraced_request_head: 'untracedRequestHeads',
  pipelined_request_head: 'pipelinedRequestHeads',
  unknown_context: 'unknownContexts',
  unknown_target: 'unknownTargets',
  unreadable_container_state: 'unreadableContainerStates',
  unresolved_container_path: 'unresolvedContainerPaths',
  container_past_bound: 'containersPastBound',
  // a thread interleaving connections (an event loop) read a head: no context set, never a wrong one
  interleaved_request_head: 'interleavedHead',
  // a request's context outlived its request: what still carried it (bpf/capture/lifetime.h) lost it, by holder
  outlived_request_thread: 'outlivedThread',
  outlived_request_process: 'outlivedProcess',
  outlived_request_goroutine: 'outlivedGoroutine',
  outlived_request_unit: 'outlivedUnit',
  // a call on an HTTP/2 connection, whose streams mix: no request
  multiplexed_call: 'multiplexedCall',
  // a server's read that may bring the next request before its head is known (TLS, a peeked byte)
  unsure_read: 'unsureRead',
  // a thread a JVM made while its creator carried a request: the kernel cannot see whom it will serve
  uninherited_jvm_thread: 'uninheritedJvmThread',
};
const TOTALS: Record<string, { help: string; key: Key }> = {
  kreplay_agent_stored_events_total: { help: 'events committed to the node store', key: 'rowsWritten' },
  kreplay_agent_pruned_events_total: { help: 'stored events removed by retention', key: 'pruned' },
  kreplay_agent_unshipped_pruned_events_total: {
    help: 'of the pruned events, those the store cap removed before they were shipped',
    key: 'unshippedPruned',
  },
  kreplay_agent_restarted_calls_total: {
    help: 'calls a signal or a stop interrupted and the kernel restarted: each stored as one event from its first entry',
    key: 'restartedCall',
  },
  kreplay_agent_hook_interrupted_calls_total: {
    help: "calls the agent's own hooks interrupted (the Python hook's ptrace, the Node hook's SIGUSR1): restarted, or ended with EINTR",
    key: 'agentInterruptedCall',
  },
  kreplay_agent_corrupt_bytes_total: { help: 'ring bytes skipped as corrupt records', key: 'corruptBytes' },
  kreplay_agent_node_hook_intrusions_total: {
    help: 'connects to an inspector the agent opened, from another process, that the kernel refused (each logged with its pid)',
    key: 'nodeHookIntrusions',
  },
  kreplay_agent_node_hook_stderr_lines_total: {
    help: "lines Node printed on hooked programs' stderr for the inspectors the agent opened (Debugger listening, For help, Debugger attached)",
    key: 'nodeHookStderrLines',
  },
  kreplay_agent_store_replacements_total: {
    help: 'fresh stores opened because the file was deleted, replaced or damaged',
    key: 'storeReplacements',
  },
};

const NS_PER_S = 1e9;

/**
 * prom-client's event-loop delay histogram samples on a timer of this period (its default is 10
 * ms: 100 wake-ups a second, ~8 ms of the agent's CPU a second when idle, 40% of its main thread's;
 * bench/RESULTS.md issue 46, rate46n). It cannot be turned off alone, so it ticks once a day and the
 * gauges it feeds are not served: each would read ~a day, as each read ~10 ms (the period, not a
 * delay). `nodejs_eventloop_lag_seconds`, measured at each scrape, stays.
 */
export const EVENT_LOOP_HISTOGRAM_MS = 86_400_000;
export const EVENT_LOOP_HISTOGRAM_GAUGES = ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99'].map(
  (stat) => `nodejs_eventloop_lag_${stat}_seconds`,
);

export class AgentMetrics {
  readonly registry = new Registry();
  private source: AgentReadings | null = null;
  /** the agent's counters, read once per scrape */
  private scraped: CounterSnapshot | null = null;
  private readonly ringBatchBytes: Histogram;
  private readonly storeBatchEvents: Histogram;
  private readonly storeCommitSeconds: Histogram;

  constructor(options: { shipping: boolean; exportingOtlp?: boolean }) {
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: EVENT_LOOP_HISTOGRAM_MS });
    for (const name of EVENT_LOOP_HISTOGRAM_GAUGES) this.registry.removeSingleMetric(name);
    this.labelledTotal(
      'kreplay_agent_events_total',
      'events the kernel sent, by type',
      'type',
      EVENTS_BY_TYPE,
    );
    this.labelledTotal(
      'kreplay_agent_records_total',
      'context and target records the kernel sent beside the events',
      'kind',
      RECORDS_BY_KIND,
    );
    this.labelledTotal(
      'kreplay_agent_dropped_total',
      'records or events lost, by reason',
      'reason',
      DROPS_BY_REASON,
    );
    this.labelledTotal(
      'kreplay_agent_context_problems_total',
      'events stored without (all of) their context, by cause',
      'kind',
      CONTEXT_PROBLEMS_BY_KIND,
    );
    this.counter(
      {
        name: 'kreplay_agent_runtime_hooks_total',
        help: 'processes of each runtime by what its hook did: hooked, refused, failed, out_of_scope, no_hook (all logged)',
        labelNames: ['runtime', 'outcome'],
      },
      (counter) => {
        const now = this.scraped;
        if (now)
          for (const runtime of RUNTIMES)
            for (const outcome of HOOK_OUTCOMES)
              counter.inc({ runtime, outcome }, now[runtimeHookKey(runtime, outcome)]);
      },
    );
    for (const [name, { help, key }] of Object.entries(TOTALS))
      this.total(name, help, () => this.scraped?.[key]);
    this.gauge(
      'kreplay_agent_ring_fill_ratio',
      'peak share of the ring buffer holding unread records since the last scrape',
      () => {
        const fill = this.source?.ringPeakFill() ?? -1;
        return fill < 0 ? undefined : fill;
      },
    );
    this.gauge('kreplay_agent_store_bytes', 'size of the node store file and its WAL', () =>
      this.source?.storeBytes(),
    );
    this.gauge(
      'kreplay_agent_clock_error_seconds',
      'error bound of the boot-to-epoch clock conversion',
      () => {
        const ns = this.source?.clockErrorNs();
        return ns === undefined ? undefined : ns / NS_PER_S;
      },
    );
    this.ringBatchBytes = new Histogram({
      name: 'kreplay_agent_ring_batch_bytes',
      help: 'bytes of records handed from the ring buffer to the decoder per batch',
      buckets: exponentialBuckets(256, 4, 8),
      registers: [this.registry],
    });
    this.storeBatchEvents = new Histogram({
      name: 'kreplay_agent_store_batch_events',
      help: 'events per transaction committed to the store',
      buckets: exponentialBuckets(1, 4, 10),
      registers: [this.registry],
    });
    this.storeCommitSeconds = new Histogram({
      name: 'kreplay_agent_store_commit_seconds',
      help: "time the store's writer thread took to commit a batch",
      buckets: exponentialBuckets(0.0005, 2, 14),
      registers: [this.registry],
    });
    if (options.shipping) this.shipMetrics();
    if (options.exportingOtlp) this.otlpMetrics();
  }

  /** The running agent, read on every scrape from now on. */
  attach(source: AgentReadings): void {
    this.source = source;
  }

  observeRingBatch(bytes: number): void {
    this.ringBatchBytes.observe(bytes);
  }

  observeCommit(events: number, seconds: number): void {
    this.storeBatchEvents.observe(events);
    this.storeCommitSeconds.observe(seconds);
  }

  /** The Prometheus text exposition. */
  scrape(): Promise<string> {
    return this.reading(() => this.registry.metrics());
  }

  /** The same scrape as prom-client's JSON (docs/reference/metrics.md lists each label's values from it). */
  scrapeJson(): ReturnType<Registry['getMetricsAsJSON']> {
    return this.reading(() => this.registry.getMetricsAsJSON());
  }

  /** The agent's counters read once for the collect functions of one scrape. */
  private async reading<T>(collect: () => Promise<T>): Promise<T> {
    this.scraped = this.source?.counters() ?? null;
    try {
      return await collect();
    } finally {
      this.scraped = null;
    }
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  private shipMetrics(): void {
    const ship = () => this.source?.ship();
    this.total('kreplay_agent_shipped_events_total', 'events ClickHouse acknowledged', () => ship()?.shipped);
    this.total('kreplay_agent_ship_retries_total', 'ship batches retried', () => ship()?.retries);
    this.gauge('kreplay_agent_ship_lag_events', 'committed events not shipped yet', () => ship()?.lagEvents);
    this.gauge(
      'kreplay_agent_ship_lag_seconds',
      'age of the oldest event not shipped yet',
      () => ship()?.lagSeconds,
    );
  }

  private otlpMetrics(): void {
    const otlp = () => this.source?.otlp();
    this.counter(
      {
        name: 'kreplay_agent_otlp_spans_total',
        help: 'OTLP spans by outcome: exported (the receiver took them), dropped (the queue was full), rejected (the receiver refused them)',
        labelNames: ['outcome'],
      },
      (counter) => {
        const s = otlp();
        if (!s) return;
        counter.inc({ outcome: 'exported' }, s.exported);
        counter.inc({ outcome: 'dropped' }, s.dropped);
        counter.inc({ outcome: 'rejected' }, s.rejected);
      },
    );
    this.counter(
      {
        name: 'kreplay_agent_otlp_skipped_events_total',
        help: 'events of traces not exported one span each: unsampled (their traceparent is not sampled), summarized (past the per-trace cap, in a summary span)',
        labelNames: ['reason'],
      },
      (counter) => {
        const s = otlp();
        if (!s) return;
        counter.inc({ reason: 'unsampled' }, s.unsampled);
        counter.inc({ reason: 'summarized' }, s.summarized);
      },
    );
    this.total('kreplay_agent_otlp_retries_total', 'OTLP requests sent again', () => otlp()?.retries);
    this.total(
      'kreplay_agent_otlp_sent_bytes_total',
      'bytes of the OTLP requests the receiver accepted, as sent',
      () => otlp()?.wireBytes,
    );
    this.gauge('kreplay_agent_otlp_queued_spans', 'OTLP spans waiting to be sent', () => otlp()?.queued);
  }

  /* A counter that mirrors one of the agent's totals (set, not incremented, on each scrape). */
  private total(name: string, help: string, read: () => number | undefined): void {
    this.counter({ name, help }, (counter) => {
      const value = read();
      if (value !== undefined) counter.inc(value);
    });
  }

  private labelledTotal(name: string, help: string, label: string, keys: Record<string, Key>): void {
    this.counter({ name, help, labelNames: [label] }, (counter) => {
      const now = this.scraped;
      if (now) for (const [value, key] of Object.entries(keys)) counter.inc({ [label]: value }, now[key]);
    });
  }

  private counter(config: CounterConfiguration<string>, fill: (counter: Counter) => void): void {
    new Counter({
      ...config,
      registers: [this.registry],
      collect() {
        this.reset();
        fill(this);
      },
    });
  }

  private gauge(name: string, help: string, read: () => number | undefined): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        const value = read();
        if (value !== undefined) this.set(value);
      },
    });
  }
}
