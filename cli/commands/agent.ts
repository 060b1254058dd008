import { isPowerOfTwo, RING_BUFFER_BYTES } from '../../agent/capture/capture-options';
import { NODE_NAME, NODE_NAME_RULE } from '../../core/model/node-name';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { hostname } from 'node:os';
import type { ClickHouseHttp } from '../../core/clickhouse/http-client';
import { clickhouseTarget } from '../clickhouse-target';
import type { OnCorrupt } from '../../agent/store/store-keeper';
import { AGENT_BATCH_ROWS } from '../../agent/store/store-pipeline';
import { commitRule, MAX_COMMIT_WAIT_MS } from '../../agent/commit-cadence';
import { WRITER_CACHE_KIB } from '../../core/store/schema';
import { loggerFromFlags } from '../flag-logger';
import { addLogOptions, type LogFlags } from '../log-options';
import { untilSignal } from '../signals';
import {
  DEFAULT_MAX_STORE_SHARE,
  DEFAULT_RETAIN_CONTEXT_NS,
  DEFAULT_RETAIN_NS,
  type StoreCap,
} from '../../agent/store/retention';
import {
  collectIntegers,
  durationOption,
  integerOption,
  listenAddressOption,
  parsedOption,
  sizeOption,
} from '../options';
import {
  parseHookSelector,
  parseSampleRate,
  parseSelector,
  type Selector,
} from '../../agent/filter/selector';
import type { AgentConfig } from '../../agent/config/config-schema';
import type { FilterOptions } from '../../agent/filter/capture-filter';
import type { AgentOptions } from '../../agent/agent';
import type { ListenAddress } from '../../agent/metrics/metrics-server';
import { OTLP_PROTOCOLS, type OtlpProtocol } from '../../core/otlp/otlp-protocols';
import {
  DEFAULT_MAX_SPANS_PER_TRACE,
  DEFAULT_QUEUE_SPANS,
  OTLP_SAMPLING,
  resolveOtlpTarget,
  type OtlpSampling,
  type OtlpTarget,
} from '../../agent/otlp/otlp-target';

interface AgentFlags extends LogFlags {
  dataDir: string;
  node?: string;
  config?: string;
  pid?: number[];
  comm?: string;
  cgroupId?: number;
  include?: Selector[];
  exclude?: Selector[];
  hookInclude?: Selector[];
  hookExclude?: Selector[];
  filterTransactions?: boolean;
  sampleBackground?: number;
  minDurationNs: number;
  ringBufferMb: number;
  storeCacheMb: number;
  attribution: boolean;
  nodeHook: boolean;
  pythonHook: boolean;
  targets: boolean;
  captureReads?: boolean;
  quiet: boolean;
  statusInterval: number;
  maxCommitWaitMs: number;
  onCorrupt: OnCorrupt;
  retain: number;
  retainContext: number;
  maxStoreBytes: StoreCap;
  ship?: string;
  shipUser?: string;
  shipPasswordFile?: string;
  metricsListen?: ListenAddress;
  otlp?: string;
  otlpProtocol?: OtlpProtocol;
  otlpSample?: OtlpSampling;
  otlpCertificate?: string;
  otlpMaxSpansPerTrace?: number;
  otlpQueue?: number;
}

/* Past this, a drain that the store cannot finish is cut short: a signal must stop the agent in seconds. */
const DRAIN_DEADLINE_MS = 10_000;

/** The fleet store to ship to; the password comes from a file or KREPLAY_SHIP_PASSWORD, never a flag value. */
function shipTarget(flags: AgentFlags): ClickHouseHttp | undefined {
  if (flags.ship === undefined) {
    if (flags.shipUser !== undefined || flags.shipPasswordFile !== undefined)
      throw new InvalidArgumentError(
        '--ship-user and --ship-password-file need --ship clickhouse://HOST:PORT/DB',
      );
    return undefined;
  }
  return clickhouseTarget(flags.ship, flags.shipUser, {
    flag: '--ship-password-file',
    path: flags.shipPasswordFile,
  });
}

const MIB = 1024 * 1024;

/** The OTLP export: flags, then the config file's otlp section, then the OTEL_EXPORTER_OTLP_* variables. */
function otlpTarget(flags: AgentFlags, config: AgentConfig): OtlpTarget | undefined {
  const c = config.otlp;
  return resolveOtlpTarget(
    {
      endpoint: flags.otlp,
      protocol: flags.otlpProtocol,
      sampling: flags.otlpSample,
      certificate: flags.otlpCertificate,
      maxSpansPerTrace: flags.otlpMaxSpansPerTrace,
      queueSpans: flags.otlpQueue,
    },
    {
      endpoint: c?.endpoint,
      protocol: c?.protocol,
      sampling: c?.sample,
      headers: c?.headers,
      certificate: c?.certificate,
      maxSpansPerTrace: c?.max_spans_per_trace,
      queueSpans: c?.queue_spans,
    },
    process.env,
  );
}

/**
 * The config file's capture section plus the flags: flags add selectors, and
 * --pid, --comm and --cgroup-id are includes written the old way.
 */
function filterOptions(flags: AgentFlags, config: AgentConfig): FilterOptions {
  const shorthand: Selector[] = [
    ...(flags.pid ?? []).map((pid): Selector => ({ kind: 'pid', pid })),
    ...(flags.comm === undefined ? [] : [{ kind: 'comm', comm: flags.comm } as const]),
    ...(flags.cgroupId === undefined ? [] : [{ kind: 'cgroup-id', id: BigInt(flags.cgroupId) } as const]),
  ];
  const include = [...(config.capture.include ?? []), ...(flags.include ?? []), ...shorthand];
  const given = config.capture.include !== undefined || flags.include !== undefined || shorthand.length > 0;
  return {
    include: given ? include : undefined,
    exclude: [...config.capture.exclude, ...(flags.exclude ?? [])],
    filterTransactions: flags.filterTransactions ?? config.capture.filter_transactions,
  };
}

/** Which processes the runtime hooks go into: the config file's hook_include/hook_exclude plus the flags'. */
function hookScope(flags: AgentFlags, config: AgentConfig): AgentOptions['hookScope'] {
  const given = config.capture.hook_include !== undefined || flags.hookInclude !== undefined;
  return {
    include: given ? [...(config.capture.hook_include ?? []), ...(flags.hookInclude ?? [])] : undefined,
    exclude: [...config.capture.hook_exclude, ...(flags.hookExclude ?? [])],
  };
}

/* Loaded when an agent runs, not by every command: zod, yaml and prom-client cost a CLI start ~60 ms. */
const agentModules = async () => {
  const [{ Agent }, { loadConfig }, { AgentMetrics }, { startMetricsServer }] = await Promise.all([
    import('../../agent/agent'),
    import('../../agent/config/load-config'),
    import('../../agent/metrics/agent-metrics'),
    import('../../agent/metrics/metrics-server'),
  ]);
  return { Agent, loadConfig, AgentMetrics, startMetricsServer };
};

export async function runAgentCommand(flags: AgentFlags): Promise<void> {
  const { Agent, loadConfig, AgentMetrics, startMetricsServer } = await agentModules();
  const log = loggerFromFlags(flags, 'agent');
  const config = loadConfig(flags.config);
  const node = flags.node ?? config.node ?? hostname();
  if (!NODE_NAME.test(node)) throw new InvalidArgumentError(`--node "${node}" must be ${NODE_NAME_RULE}`);
  const ringBytes = flags.ringBufferMb * MIB;
  if (!isPowerOfTwo(ringBytes))
    throw new InvalidArgumentError(`--ring-buffer-mb ${flags.ringBufferMb} must be a power of two`);
  const ship = shipTarget(flags);
  const otlp = otlpTarget(flags, config);
  // Bound before the probes attach, so a taken address fails before anything is loaded.
  const metrics = flags.metricsListen
    ? new AgentMetrics({ shipping: ship !== undefined, exportingOtlp: otlp !== undefined })
    : undefined;
  const metricsServer =
    metrics && flags.metricsListen
      ? await startMetricsServer(metrics, flags.metricsListen, log.child('metrics'))
      : undefined;
  try {
    // Listening before the probes attach: a signal during start-up stops the agent once it is up.
    const signalled = untilSignal(log);
    const agent = await Agent.start(
      {
        dataDir: flags.dataDir,
        node,
        config,
        filter: filterOptions(flags, config),
        capture: {
          ringBufferBytes: ringBytes,
          sampleBackground: flags.sampleBackground ?? config.capture.sample_background,
          minDurationNs: flags.minDurationNs,
          attribution: flags.attribution,
          targets: flags.targets,
          captureReads: flags.captureReads ?? config.capture.capture_reads,
        },
        batchRows: AGENT_BATCH_ROWS,
        commitRule: commitRule(flags.maxCommitWaitMs),
        statusIntervalMs: flags.statusInterval * 1000,
        quiet: flags.quiet,
        onCorrupt: flags.onCorrupt,
        storeCacheKib: flags.storeCacheMb * 1024,
        retention: {
          retainNs: flags.retain,
          retainContextNs: flags.retainContext,
          maxStore: flags.maxStoreBytes,
        },
        ship,
        metrics,
        hookScope: hookScope(flags, config),
        nodeHook: flags.nodeHook && config.capture.node_hook,
        pythonHook: flags.pythonHook && config.capture.python_hook,
        otlp,
      },
      log,
    );
    const outcome = await Promise.race([
      signalled.then((signal) => ({ reason: `signal ${signal}`, error: null })),
      agent.failed().then((error) => ({ reason: `store failed: ${error.message}`, error })),
    ]);
    const deadline = setTimeout(() => {
      log.error(`the drain did not finish within ${DRAIN_DEADLINE_MS / 1000} s; exiting without it`, {
        done:
          Object.entries(agent.stopSteps)
            .map(([step, ms]) => `${step}=${ms}`)
            .join(',') || 'nothing',
      });
      process.exit(1);
    }, DRAIN_DEADLINE_MS);
    deadline.unref();
    // once the store is closed nothing is left to lose: the probes' detaching is not cut short
    await agent.stop(outcome.reason, () => clearTimeout(deadline));
    if (outcome.error) throw outcome.error;
  } finally {
    await metricsServer?.close();
  }
}

export function registerAgentCommand(program: Command): Command {
  const command = program
    .command('agent')
    .description(
      'trace writes, sends, reads, fsyncs, connects and block I/O into <data-dir>/<node>.db (needs root)',
    )
    .requiredOption('--data-dir <dir>', 'directory for the node store')
    .option('--node <name>', 'node name (default: the host name)')
    .option('--config <file>', 'service rules, JSON or YAML')
    .option(
      '--include <selector>',
      'only capture tasks of this service:NAME, cgroup:PATH, comm:NAME, pid:N, cgroup-id:N, container:NAME (name, id or id prefix), pod:NAME or namespace:NAME (repeatable: any of them)',
      parsedOption(parseSelector, true),
    )
    .option(
      '--exclude <selector>',
      'never capture tasks of this selector (repeatable; wins over --include)',
      parsedOption(parseSelector, true),
    )
    .option(
      '--hook-include <selector>',
      'only hook the Node and Python processes of this service:NAME, cgroup:PATH, comm:NAME, exe:PATH, pid:N, cgroup-id:N, container:NAME, pod:NAME or namespace:NAME (repeatable: any of them; default: processes that listen on TCP and their children)',
      parsedOption(parseHookSelector, true),
    )
    .option(
      '--hook-exclude <selector>',
      'never hook the processes of this selector (repeatable; wins over --hook-include)',
      parsedOption(parseHookSelector, true),
    )
    .option('--filter-transactions', 'excluded tasks lose their transaction events too (kept by default)')
    .option(
      '--sample-background <1/N>',
      'keep one in N writes made outside any transaction, in the kernel (the run records N)',
      parsedOption(parseSampleRate, false),
    )
    .option(
      '--capture-reads',
      'record the reads of threads outside any transaction too (by default only those of threads with a context)',
    )
    .option('--pid <pid>', 'same as --include pid:N (repeatable)', collectIntegers(1, 4194304))
    .option('--comm <comm>', 'same as --include comm:NAME')
    .option('--cgroup-id <id>', 'same as --include cgroup-id:N', integerOption(1, Number.MAX_SAFE_INTEGER))
    .option(
      '--min-duration-ns <ns>',
      'drop calls shorter than this in the kernel',
      integerOption(0, Number.MAX_SAFE_INTEGER),
      0,
    )
    .option(
      '--ring-buffer-mb <mb>',
      'ring buffer size, a power of two',
      integerOption(1, RING_BUFFER_BYTES.max / MIB),
      RING_BUFFER_BYTES.default / MIB,
    )
    .option(
      '--store-cache-mb <mb>',
      "SQLite's page cache for the store (resident memory of the agent)",
      integerOption(1, 4096),
      WRITER_CACHE_KIB / 1024,
    )
    .option('--no-attribution', 'do not look for KREPLAY-CTX markers and HTTP heads')
    .option(
      '--no-node-hook',
      'do not hook the Node processes the filters include (their requests then stay unattributed; docs/operate.md)',
    )
    .option(
      '--no-python-hook',
      'do not queue the Python hook into the CPython processes the filters include (their asyncio, grpcio and pool work then stays unattributed; needs CAP_SYS_PTRACE; docs/operate.md)',
    )
    .option('--no-targets', 'do not resolve what each write went to (path, socket peer)')
    .option(
      '--max-commit-wait-ms <ms>',
      "commit an event at most this long after it reaches the agent (a burst's once it ends): longer costs less CPU a request, shorter makes events readable sooner",
      integerOption(MAX_COMMIT_WAIT_MS.min, MAX_COMMIT_WAIT_MS.max),
      MAX_COMMIT_WAIT_MS.default,
    )
    .option('--status-interval <s>', 'seconds between status lines', integerOption(1, 3600), 5)
    .option('-q, --quiet', 'no status lines', false)
    .addOption(
      new Option(
        '--on-corrupt <action>',
        'a damaged store: refuse to start, or rename it aside and start fresh',
      )
        .choices(['refuse', 'rename'])
        .default('refuse'),
    )
    .option(
      '--retain <duration>',
      'keep events without a transaction this long (90s, 30m, 6h, 7d; 0 = forever)',
      durationOption,
      DEFAULT_RETAIN_NS,
    )
    .option(
      '--retain-context <duration>',
      'keep events with a transaction or trace context this long (0 = forever)',
      durationOption,
      DEFAULT_RETAIN_CONTEXT_NS,
    )
    .option(
      '--max-store-bytes <size>',
      "cap on the store and its WAL: bytes (512M, 20G) or a share of the data dir's filesystem (10%); oldest events go first, background before transaction events; 0 = no cap",
      sizeOption,
      { share: DEFAULT_MAX_STORE_SHARE },
    )
    .option(
      '--ship <url>',
      'also ship committed events to ClickHouse at clickhouse://HOST:HTTP_PORT/DB[?cluster=NAME&timeout=SECONDS&compression=lz4|gzip|none]',
    )
    .option('--ship-user <user>', 'ClickHouse user for --ship')
    .option(
      '--ship-password-file <file>',
      'file holding the ClickHouse password (or set KREPLAY_SHIP_PASSWORD)',
    )
    .option(
      '--metrics-listen <host:port>',
      'serve Prometheus metrics at http://HOST:PORT/metrics (e.g. 127.0.0.1:9464)',
      listenAddressOption,
    )
    .option(
      '--otlp <url>',
      "export the events of W3C traces as OTLP spans to this OTLP/HTTP receiver's base URL (/v1/traces is appended; default: OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    .addOption(
      new Option(
        '--otlp-protocol <protocol>',
        'OTLP encoding (default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)',
      ).choices(OTLP_PROTOCOLS),
    )
    .addOption(
      new Option(
        '--otlp-sample <which>',
        'sampled: only traces whose traceparent has the sampled flag (the default); all: every trace',
      ).choices(OTLP_SAMPLING),
    )
    .option(
      '--otlp-certificate <file>',
      "PEM of the CA that signs the receiver's certificate (default: OTEL_EXPORTER_OTLP_CERTIFICATE)",
    )
    .option(
      '--otlp-max-spans-per-trace <n>',
      `spans of one trace exported one by one; the rest of its events go into one summary span (default ${DEFAULT_MAX_SPANS_PER_TRACE})`,
      integerOption(1, 1_000_000_000),
    )
    .option(
      '--otlp-queue <spans>',
      `spans waiting to be sent at most; beyond, spans are dropped and counted (default ${DEFAULT_QUEUE_SPANS})`,
      integerOption(1, 100_000_000),
    );
  return addLogOptions(command).action((flags: AgentFlags) => runAgentCommand(flags));
}
