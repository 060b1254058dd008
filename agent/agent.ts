/**
 * The agent: kernel records -> decoder -> node store, in large transactions.
 * This thread decodes; the store pipeline's thread commits (see
 * store/store-pipeline.ts); the kernel counts whatever the ring cannot hold.
 */
import { kernelCounters } from '../core/model';
import { release } from 'node:os';
import { clockOffset, startCapture, type Capture, type CaptureOptions } from './capture';
import { ContextResolver } from './attribution/context-resolver';
import { ServiceResolver } from './attribution/service-resolver';
import { CgroupPaths } from './attribution/cgroup-paths';
import { CGROUP_RESCAN_MS, CgroupSelection, type FilterOptions } from './filter/capture-filter';
import { describeFilter } from './filter/selector';
import type { AgentConfig } from './config/config-schema';
import { CorruptRecordError, RecordDecoder } from './ingest/record-decoder';
import type { Logger } from '../core/log/logger';
import type { RetentionOptions } from './store/retention';
import type { OnCorrupt } from './store/store-keeper';
import { StorePipeline, type StoreThreadError } from './store/store-pipeline';
import { formatStatusLine, storedCounters, totalLost, type CounterSnapshot } from './status';
import { formatShipStatus, shipCounters } from './ship/ship-status';
import { VERSION } from '../core/version';
import type { ClickHouseHttp } from '../core/clickhouse/http-client';
import { Shipper, type ShipStatus } from './ship/shipper';
import type { AgentMetrics, AgentReadings, RuntimeHookCount } from './metrics/agent-metrics';
import { PythonHooks, PYTHON_HOOK_RESULTS } from './runtimes/python/python-hooks';
import type { KernelFilter } from './filter/task-wanted';
import { RingPeaks } from './ring-peaks';

export interface AgentOptions {
  dataDir: string;
  node: string;
  config: AgentConfig;
  capture: CaptureOptions;
  /** --include/--exclude; none: every task */
  filter?: FilterOptions;
  /** rows per transaction */
  batchRows: number;
  /** commit what is pending at least this often */
  flushIntervalMs: number;
  statusIntervalMs: number;
  quiet: boolean;
  /** a damaged store on start: refuse (naming it), or move it aside and start a fresh one */
  onCorrupt: OnCorrupt;
  /** none: the store keeps everything */
  retention?: RetentionOptions;
  /** SQLite's page cache, KiB (default WRITER_CACHE_KIB) */
  storeCacheKib?: number;
  /** ship committed events to this fleet store (agent/ship) */
  ship?: ClickHouseHttp;
  /** --metrics-listen: fed by this agent and read by each scrape */
  metrics?: AgentMetrics;
  /** default true: queue the Python hook into the CPython processes the filters include (--no-python-hook) */
  pythonHook?: boolean;
}

export interface AgentSummary {
  rowsWritten: number;
  lost: number;
  counters: CounterSnapshot;
  path: string;
}

const CLOCK_RESYNC_MS = 60_000;
const STATUS_CHECK_MS = 100;
/** How long a clean stop may spend shipping what the store holds past the cursor. */
const SHIP_FLUSH_MS = 3000;

function nowEpochNs(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}

export class Agent implements AgentReadings {
  private readonly decoder: RecordDecoder;
  private readonly contexts: ContextResolver;
  private readonly services: ServiceResolver;
  private capture: Capture | null = null;
  private cgroupFilterFailed = false;
  private offsetNs: bigint;
  private clockError: number;
  private readonly ringPeaks = new RingPeaks(() => this.capture?.ringFill() ?? -1);
  private readonly statusRingFill = this.ringPeaks.reader();
  private readonly metricsRingFill = this.ringPeaks.reader();
  private corruptRecords = 0;
  private corruptBytes = 0;
  private lastStatus: CounterSnapshot;
  private lastStatusAt = performance.now();
  private readonly timers: NodeJS.Timeout[] = [];
  private shipper: Shipper | null = null;
  private pythonHooks: PythonHooks | null = null;
  /** --include/--exclude with the cgroup ids resolved last */
  private taskFilter: KernelFilter = { exclude: [] };

  private constructor(
    private readonly options: AgentOptions,
    private readonly store: StorePipeline,
    private readonly log: Logger,
  ) {
    const clock = clockOffset();
    this.offsetNs = clock.offsetNs;
    this.clockError = clock.errorNs;
    this.contexts = new ContextResolver(log.child('context'));
    this.services = new ServiceResolver(options.config.services);
    this.decoder = new RecordDecoder(
      store,
      this.services,
      this.contexts,
      () => this.offsetNs,
      options.capture.sampleBackground,
    );
    this.lastStatus = this.counters();
    store.whenContextsForgotten(() => this.decoder.forgetContextIds());
  }

  /** Opens the store (validating the data dir and schema first), then attaches the probes. */
  static async start(options: AgentOptions, log: Logger): Promise<Agent> {
    const store = await StorePipeline.open(
      options.dataDir,
      options.node,
      options.batchRows,
      { onCorrupt: options.onCorrupt, retention: options.retention, cacheKib: options.storeCacheKib },
      log.child('store'),
    );
    const agent = new Agent(options, store, log);
    const filter = options.filter ?? { exclude: [], filterTransactions: false };
    const cgroupPaths = new CgroupPaths();
    const cgroups = new CgroupSelection(filter, agent.services, cgroupPaths);
    const selected = cgroups.captureOptions();
    agent.taskFilter = { include: selected.include, exclude: selected.exclude ?? [] };
    try {
      // startCapture mounts tracefs when it is missing
      agent.capture = startCapture(
        { ...options.capture, ...selected },
        (buf) => agent.onBatch(buf),
        log.child('capture'),
      );
    } catch (err) {
      await store.close();
      throw err;
    }
    store.beginRun({
      node: options.node,
      startedNs: nowEpochNs(),
      kernel: release(),
      agentVersion: VERSION,
      attachPoints: agent.capture.attachPoints,
      clockOffsetNs: agent.offsetNs,
      clockErrorNs: agent.clockError,
      sampleBackground: options.capture.sampleBackground ?? 1,
      filter: describeFilter(filter),
    });
    if (cgroups.live) agent.timers.push(setInterval(() => agent.refreshCgroups(cgroups), CGROUP_RESCAN_MS));
    log.info('capturing', { store: store.path, node: options.node });
    if (options.ship) {
      agent.shipper = new Shipper(store.path, options.ship);
      agent.shipper.start();
      log.info('shipping', { to: agent.shipper.status().destination });
    }
    if (options.pythonHook !== false && options.capture.attribution !== false)
      agent.startPythonHooks(cgroupPaths, log.child('python-hook'));
    agent.timers.push(setInterval(() => agent.flush(), options.flushIntervalMs));
    // Due lines are also written from the decode path and while waiting on the store, so a storm
    // that keeps this thread busy does not stop them (see maybeReportStatus).
    agent.timers.push(setInterval(() => agent.maybeReportStatus(), STATUS_CHECK_MS));
    store.whileWaiting(() => agent.maybeReportStatus());
    agent.timers.push(setInterval(() => agent.resyncClock(), CLOCK_RESYNC_MS));
    const metrics = options.metrics;
    if (metrics) {
      store.whenCommitted((events, seconds) => metrics.observeCommit(events, seconds));
      metrics.attach(agent);
    }
    return agent;
  }

  /* The hook signals the kernel from inside the interpreter: it is driven on x86-64 (native/py_inject). */
  private startPythonHooks(cgroupPaths: CgroupPaths, log: Logger): void {
    if (process.arch !== 'x64') {
      log.warn(`no Python hook on ${process.arch}: asyncio and pool servers stay unattributed`);
      return;
    }
    this.pythonHooks = new PythonHooks({ taskFilter: () => this.taskFilter, cgroups: cgroupPaths, log });
    this.pythonHooks.start();
  }

  private resyncClock(): void {
    const clock = clockOffset();
    this.offsetNs = clock.offsetNs;
    this.clockError = clock.errorNs;
  }

  /* Services and cgroup paths name other cgroup ids as cgroups come and go. */
  private refreshCgroups(cgroups: CgroupSelection): void {
    try {
      const ids = cgroups.changed();
      if (ids) {
        this.capture?.setCgroupFilter(ids.include, ids.exclude);
        this.taskFilter = cgroups.selectors(ids);
      }
      this.cgroupFilterFailed = false;
    } catch (err) {
      if (!this.cgroupFilterFailed)
        this.log.warn(`cannot update the cgroup filter: ${(err as Error).message}`);
      this.cgroupFilterFailed = true;
    }
  }

  private onBatch(buf: Buffer): void {
    this.options.metrics?.observeRingBatch(buf.length);
    try {
      this.decoder.decode(buf, this.store);
    } catch (err) {
      if (!(err instanceof CorruptRecordError)) throw err;
      this.corruptRecords++;
      this.corruptBytes += err.lostBytes;
      this.log.warn(err.message);
    }
    this.maybeReportStatus();
  }

  private maybeReportStatus(): void {
    if (performance.now() - this.lastStatusAt >= this.options.statusIntervalMs) this.reportStatus();
  }

  private flush(): void {
    this.store.flush();
  }

  ringPeakFill(): number {
    return this.metricsRingFill();
  }

  storeBytes(): number {
    return this.store.dbBytes();
  }

  clockErrorNs(): number {
    return this.clockError;
  }

  ship(): ShipStatus | undefined {
    return this.shipper?.status();
  }

  runtimeHooks(): RuntimeHookCount[] {
    const python = this.pythonHooks;
    return python
      ? PYTHON_HOOK_RESULTS.map((result) => ({ runtime: 'python', result, count: python.counts[result] }))
      : [];
  }

  /** The agent's totals since start: the kernel's, the decoder's and the store's. */
  counters(): CounterSnapshot {
    const kernel = this.capture?.counters() ?? kernelCounters([]);
    return {
      ...kernel,
      // one figure: the kernel's sampling and the decoder's, of writes whose context held nothing
      sysWriteSampledOut: kernel.sysWriteSampledOut + this.decoder.sampledOut,
      malformedMarkers: this.contexts.malformedMarkers,
      incompleteRequestHeads: this.contexts.incompleteRequestHeads,
      untracedRequestHeads: this.contexts.untracedRequestHeads,
      pipelinedRequestHeads: this.contexts.pipelinedRequestHeads,
      unknownContexts: this.contexts.unknownIds,
      unknownTargets: this.decoder.unknownTargets,
      corruptRecords: this.corruptRecords,
      corruptBytes: this.corruptBytes,
      diskFullDropped: this.store.dropped.diskFull,
      storeErrorDropped: this.store.dropped.storeError,
      storeReplacements: this.store.replacements,
      rowsWritten: this.store.rowsWritten,
      pruned: this.store.pruned,
      unshippedPruned: this.store.unshippedPruned,
    };
  }

  /** Resolves if the store fails for good (a full disk is ridden out, not a failure). */
  failed(): Promise<StoreThreadError> {
    return new Promise((resolve) => this.store.whenFailed(resolve));
  }

  private reportStatus(): void {
    const now = this.counters();
    const at = performance.now();
    const ship = this.shipper?.status();
    this.store.recordCounters(nowEpochNs(), { ...storedCounters(now), ...(ship && shipCounters(ship)) });
    if (!this.options.quiet) {
      const line = formatStatusLine(
        now,
        this.lastStatus,
        (at - this.lastStatusAt) / 1000,
        this.statusRingFill(),
        this.store.dbBytes(),
      );
      this.log.info(ship ? `${line} ${formatShipStatus(ship)}` : line);
    }
    this.lastStatus = now;
    this.lastStatusAt = at;
  }

  /** Drains the ring, commits everything, records the run's end. */
  async stop(reason: string): Promise<AgentSummary> {
    for (const timer of this.timers) clearInterval(timer);
    await this.pythonHooks?.stop();
    await this.capture?.stop();
    this.store.drain();
    // the tail is shipped if ClickHouse answers at once; what is not acknowledged stays in the
    // store, and the next run ships it from the cursor
    await this.shipper?.stop(SHIP_FLUSH_MS);
    const counters = this.counters();
    this.store.recordCounters(nowEpochNs(), storedCounters(counters));
    this.store.endRun(nowEpochNs(), reason);
    await this.store.close();
    const summary = {
      rowsWritten: counters.rowsWritten,
      lost: totalLost(counters),
      counters,
      path: this.store.path,
    };
    this.log.info('stopped', {
      reason,
      stored: summary.rowsWritten,
      lost: summary.lost,
      store: summary.path,
    });
    return summary;
  }
}
