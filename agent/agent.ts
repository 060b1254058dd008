/**
 * The agent: kernel records -> decoder -> node store, in large transactions.
 * This thread decodes; the store pipeline's thread commits (see
 * store/store-pipeline.ts); the kernel counts whatever the ring cannot hold.
 */
import { kernelCounters } from '../core/model';
import { readFileSync } from 'node:fs';
import { release } from 'node:os';
import { clockOffset, startCapture, watchClockSet, type Capture, type CaptureOptions } from './capture';
import { ContextResolver } from './attribution/context-resolver';
import { ServiceResolver } from './attribution/service-resolver';
import { ContainerResolver } from './attribution/container-resolver';
import { DEFAULT_RUNTIME_ROOTS } from './attribution/container-state';
import { CgroupPaths } from './attribution/cgroup-paths';
import { CGROUP_RESCAN_MS, CgroupSelection, type FilterOptions } from './filter/capture-filter';
import { describeFilter, type Selector } from './filter/selector';
import { readSelectedProcess } from './filter/process-selectors';
import { HookScope } from './runtimes/discovery/hook-scope';
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
import type { AgentMetrics, AgentReadings } from './metrics/agent-metrics';
import { RingPeaks } from './ring-peaks';
import { ProcessDiscovery } from './runtimes/discovery/process-discovery';
import { RuntimeClassifier } from './runtimes/discovery/classify';
import { runtimeInjectors } from './runtimes/discovery/runtime-injectors';
import { NodeHookInjector } from './runtimes/node/node-hooks';
import { runtimeHookCounters } from './runtimes/discovery/runtime-hook';
import { selectionWants, type KernelSelection } from './filter/task-filter';
import { nativeAddon } from '../core/native/addon';
import { OtlpExporter, type OtlpStatus } from './otlp/otlp-exporter';
import type { OtlpTarget } from './otlp/otlp-target';
import type { OtlpLoopOptions } from './otlp/otlp-loop';
import { formatOtlpStatus, otlpCounters } from './otlp/otlp-status';
import { CommitCadence, type CommitRule } from './commit-cadence';
import { DueTimer } from './due-timer';
import { epochNs } from '../core/epoch-ns';

export interface AgentOptions {
  dataDir: string;
  node: string;
  config: AgentConfig;
  capture: CaptureOptions;
  /** --include/--exclude; none: every task */
  filter?: FilterOptions;
  /** rows per transaction */
  batchRows: number;
  /** when pending rows are committed (`--max-commit-wait-ms`) */
  commitRule: CommitRule;
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
  /** --hook-include/--hook-exclude: which processes the runtime hooks go into (default: servers and their children) */
  hookScope?: { include?: Selector[]; exclude: Selector[] };
  /** hook the Node processes the filters include (agent/runtimes/node); default: with attribution */
  nodeHook?: boolean;
  /** queue the Python hook into the CPython processes the filters include (agent/runtimes/python); default: with attribution */
  pythonHook?: boolean;
  /** export the events of W3C traces as OTLP spans (agent/otlp) */
  otlp?: OtlpTarget;
  /** the export's batching and retry timings (tests, benchmarks) */
  otlpLoop?: OtlpLoopOptions;
}

export interface AgentSummary {
  rowsWritten: number;
  lost: number;
  counters: CounterSnapshot;
  path: string;
}

const CLOCK_RESYNC_MS = 60_000;
/** How long a clean stop may spend shipping what the store holds past the cursor. */
const SHIP_FLUSH_MS = 3000;
/** How long a clean stop may spend sending the OTLP queue (what is left is counted as dropped). */
const OTLP_FLUSH_MS = 3000;

/** Marks in `ended` when each step of a stop ended, in ms since the stop began (steps may overlap). */
function stopwatch(ended: Record<string, number>): (step: string) => Record<string, number> {
  const began = performance.now();
  return (step) => {
    ended[step] = Math.round(performance.now() - began);
    return ended;
  };
}

export class Agent implements AgentReadings {
  private readonly decoder: RecordDecoder;
  private readonly contexts: ContextResolver;
  private readonly services: ServiceResolver;
  private capture: Capture | null = null;
  private cgroupFilterFailed = false;
  private offsetNs: bigint;
  private clockError: number;
  private clockSetWatch: { close(): void } | null = null;
  private readonly ringPeaks = new RingPeaks(() => this.capture?.ringFill() ?? -1);
  private readonly statusRingFill = this.ringPeaks.reader();
  private readonly metricsRingFill = this.ringPeaks.reader();
  private corruptRecords = 0;
  private corruptBytes = 0;
  private lastStatus: CounterSnapshot;
  private lastStatusAt = performance.now();
  /** The steps of stop() done so far: what a stop cut short had finished */
  readonly stopSteps: Record<string, number> = {};
  private readonly timers: NodeJS.Timeout[] = [];
  /** the status line's, set for when it is due */
  private readonly statusTimer = new DueTimer(
    () => this.lastStatusAt + this.options.statusIntervalMs,
    () => this.reportStatus(),
  );
  private shipper: Shipper | null = null;
  private runtimeHooks: ProcessDiscovery | null = null;
  private nodeHooks: NodeHookInjector | null = null;
  /** what the kernel filter selects now (cgroup ids resolved), for what the agent does to processes */
  private selection: KernelSelection = { exclude: [] };
  private readonly cgroupPaths = new CgroupPaths();
  private otlpExporter: OtlpExporter | null = null;
  private readonly cadence: CommitCadence;

  private constructor(
    private readonly options: AgentOptions,
    private readonly store: StorePipeline,
    private readonly log: Logger,
  ) {
    const clock = clockOffset();
    this.offsetNs = clock.offsetNs;
    this.clockError = clock.errorNs;
    this.contexts = new ContextResolver(log.child('context'));
    const containerLog = log.child('containers');
    this.services = new ServiceResolver(
      options.config.services,
      undefined,
      undefined,
      new ContainerResolver(DEFAULT_RUNTIME_ROOTS, (id, problem) =>
        containerLog.warn("a container's runtime state could not be read whole", { container: id, problem }),
      ),
    );
    this.decoder = new RecordDecoder(
      store,
      this.services,
      this.contexts,
      () => this.offsetNs,
      options.capture.sampleBackground,
    );
    this.lastStatus = this.counters();
    this.cadence = new CommitCadence(() => store.flush(), options.commitRule);
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
    // before the probes attach: the export starts with the first events they bring
    if (options.otlp) agent.otlpExporter = new OtlpExporter(store.path, options.otlp, options.otlpLoop);
    const filter = options.filter ?? { exclude: [], filterTransactions: false };
    const cgroups = new CgroupSelection(filter, agent.services, agent.cgroupPaths);
    const selected = cgroups.captureOptions();
    agent.selection = { include: selected.include, exclude: selected.exclude ?? [] };
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
      startedNs: epochNs(),
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
    if (options.capture.attribution !== false) {
      const hookLog = log.child('runtime-hook');
      const scope = new HookScope({
        ...(options.hookScope ?? { exclude: [] }),
        captured: (pid) => agent.wantsProcess(pid),
        read: (pid) => readSelectedProcess(pid, agent.services, agent.cgroupPaths),
      });
      const injectors = runtimeInjectors({
        nodeHook: options.nodeHook ?? true,
        pythonHook: options.pythonHook ?? true,
        followLibuv: (pid) => agent.capture?.followLibuv(pid),
        addon: nativeAddon(),
        log: hookLog,
      });
      // its inspectors' counters (intrusions, stderr lines) beside the discovery's
      if (injectors.node instanceof NodeHookInjector) agent.nodeHooks = injectors.node;
      agent.runtimeHooks = new ProcessDiscovery({
        injectors,
        classifier: new RuntimeClassifier(nativeAddon()),
        scope: (pid) => scope.check(pid),
        markJvm: (pid) => agent.capture?.markJvm(pid),
        changes: () => agent.capture?.processChanges(),
        log: hookLog,
      });
      agent.runtimeHooks.start();
    }
    if (options.ship) {
      agent.shipper = new Shipper(store.path, options.ship);
      agent.shipper.start();
      log.info('shipping', { to: agent.shipper.status().destination });
    }
    if (agent.otlpExporter) {
      agent.otlpExporter.start((err) => log.error(`the OTLP export stopped: ${err.message}`));
      log.info('exporting OTLP spans', {
        to: options.otlp!.url,
        from: options.otlp!.endpointFrom,
        protocol: options.otlp!.protocol,
        sampling: options.otlp!.sampling,
      });
    }
    // Due lines are also written from the decode path and while waiting on the store, so a storm
    // that keeps this thread busy does not stop them (see maybeReportStatus).
    agent.statusTimer.start();
    store.whileWaiting(() => agent.maybeReportStatus());
    // a step is seen as it happens; the periodic resync follows a slewed clock
    agent.timers.push(setInterval(() => agent.resyncClock(), CLOCK_RESYNC_MS));
    agent.clockSetWatch = watchClockSet(log, () => agent.clockWasSet());
    const metrics = options.metrics;
    if (metrics) {
      store.whenCommitted((events, seconds) => metrics.observeCommit(events, seconds));
      metrics.attach(agent);
    }
    return agent;
  }

  private resyncClock(): void {
    const clock = clockOffset();
    this.offsetNs = clock.offsetNs;
    this.clockError = clock.errorNs;
  }

  /** Records read from now on are stamped by the wall clock as it was set (those read before kept theirs). */
  private clockWasSet(): void {
    const before = this.offsetNs;
    this.resyncClock();
    const movedMs = Number(this.offsetNs - before) / 1e6;
    this.log.info(
      `the wall clock was set (moved ${movedMs.toFixed(3)} ms): events are stamped by it from now on`,
    );
  }

  /* Services and cgroup paths name other cgroup ids as cgroups come and go. */
  private refreshCgroups(cgroups: CgroupSelection): void {
    try {
      const ids = cgroups.changed();
      if (ids) {
        this.capture?.setCgroupFilter(ids.include, ids.exclude);
        this.selection = cgroups.kernelSelection(ids);
      }
      this.cgroupFilterFailed = false;
    } catch (err) {
      if (!this.cgroupFilterFailed)
        this.log.warn(`cannot update the cgroup filter: ${(err as Error).message}`);
      this.cgroupFilterFailed = true;
    }
  }

  /** Whether the capture filters include process `pid` now, as the kernel would decide for its main thread. */
  private wantsProcess(pid: number): boolean {
    let comm: string;
    try {
      comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trimEnd();
    } catch {
      return false;
    }
    return selectionWants(this.selection, { pid, comm, cgroupId: this.cgroupPaths.idOfProcess(pid) });
  }

  private onBatch(buf: Buffer): void {
    this.options.metrics?.observeRingBatch(buf.length);
    const handed = this.store.handed;
    const pending = this.store.current.count;
    try {
      this.decoder.decode(buf, this.store);
    } catch (err) {
      if (!(err instanceof CorruptRecordError)) throw err;
      this.corruptRecords++;
      this.corruptBytes += err.lostBytes;
      this.log.warn(err.message);
    }
    // a full batch handed over while decoding: what is pending now arrived now
    const full = this.store.handed !== handed;
    if (full) this.cadence.committed();
    if (this.store.current.count > (full ? 0 : pending)) this.cadence.arrived();
    this.maybeReportStatus();
  }

  private maybeReportStatus(): void {
    if (performance.now() - this.lastStatusAt >= this.options.statusIntervalMs) this.reportStatus();
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

  otlp(): OtlpStatus | undefined {
    return this.otlpExporter?.status();
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
      unknownTargets: this.decoder.unknownTargets + this.store.lostTargets,
      unreadableContainerStates: this.services.containers.unreadableStates,
      unresolvedContainerPaths: this.decoder.unresolvedContainerPaths,
      containersPastBound: this.decoder.containersPastBound,
      ...runtimeHookCounters(this.runtimeHooks?.counts),
      nodeHookIntrusions: this.nodeHooks?.intrusions ?? 0,
      nodeHookStderrLines: this.nodeHooks?.stderrLines ?? 0,
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
    const otlp = this.otlpExporter?.status();
    this.store.recordCounters(epochNs(), {
      ...storedCounters(now),
      ...(ship && shipCounters(ship)),
      ...(otlp && otlpCounters(otlp)),
    });
    if (!this.options.quiet) {
      const line = formatStatusLine(
        now,
        this.lastStatus,
        (at - this.lastStatusAt) / 1000,
        this.statusRingFill(),
        this.store.dbBytes(),
      );
      const parts = [line, ship && formatShipStatus(ship), otlp && formatOtlpStatus(otlp)];
      this.log.info(parts.filter(Boolean).join(' '));
    }
    this.lastStatus = now;
    this.lastStatusAt = at;
  }

  /**
   * Drains the ring, commits everything, records the run's end (then `stored` is called), and
   * resolves once the probes are detached.
   */
  async stop(reason: string, stored?: () => void): Promise<AgentSummary> {
    for (const timer of this.timers) clearInterval(timer);
    this.clockSetWatch?.close();
    this.statusTimer.stop();
    this.cadence.stop();
    // when each step ended is said: a slow stop says which step held it
    const took = stopwatch(this.stopSteps);
    // the probes detach after the records up to now are read, and are awaited once the store is
    // closed: the kernel takes seconds on a loaded host (grace periods, one tracepoint at a time)
    const detached = this.capture?.stop();
    detached?.catch(() => undefined);
    // an injection under way finishes and the Node inspectors still watched close
    // (agent/runtimes/node) while the ring drains
    await Promise.all([
      this.runtimeHooks?.stop().then(() => took('hooksStoppedMs')),
      this.capture?.drained.then(() => took('ringDrainedMs')),
    ]);
    this.store.drain();
    took('storeDrainedMs');
    // the tail is shipped if ClickHouse answers at once; what is not acknowledged stays in the
    // store, and the next run ships it from the cursor
    await Promise.all([this.shipper?.stop(SHIP_FLUSH_MS), this.otlpExporter?.stop(OTLP_FLUSH_MS)]);
    took('shippedMs');
    const shipError = this.shipper?.status(false).lastError;
    if (shipError)
      this.log.warn(
        `shipping stopped on an error, the next run ships the rest from its cursor: ${shipError}`,
      );
    const counters = this.counters();
    const otlp = this.otlpExporter?.status();
    this.store.recordCounters(epochNs(), { ...storedCounters(counters), ...(otlp && otlpCounters(otlp)) });
    if (otlp)
      this.log.info('OTLP export stopped', {
        exported: otlp.exported,
        dropped: otlp.dropped,
        rejected: otlp.rejected,
        summarized: otlp.summarized,
        unsampled: otlp.unsampled,
      });
    this.store.endRun(epochNs(), reason);
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
      ...took('closedMs'),
    });
    stored?.();
    await detached;
    this.log.info('probes detached', took('detachedMs'));
    return summary;
  }
}
