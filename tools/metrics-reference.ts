/**
 * docs/reference/metrics.md: every metric the agent and the daemon serve at /metrics, read from
 * their registries (agent/metrics/agent-metrics.ts, daemon/metrics/daemon-metrics.ts own the
 * names). Each registry is built whole (shipping and the OTLP export on, the session and query
 * watchers set) and scraped once from readings of zero: a labelled counter's collect names every
 * value of its label, so the page lists them as the code has them.
 */
import type { Registry } from 'prom-client';
import { AgentMetrics, type AgentReadings } from '../agent/metrics/agent-metrics';
import { DaemonMetrics } from '../daemon/metrics/daemon-metrics';
import type { ReplaySessions } from '../daemon/replay/sessions/session-service';
import { cell, HEADER } from './reference-format';

/** Any reading the collect functions take (a counter snapshot, ship or OTLP status): 0 for every field. */
const ZEROS = new Proxy({}, { get: () => 0 }) as never;

interface MetricDescription {
  name: string;
  type: string;
  help: string;
  /** each label with the values the code gives it (none listed: open, e.g. a route) */
  labels: Map<string, Set<string>>;
}

type ScrapedJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

/** kreplay's own metrics in a registry (prom-client's process_* and nodejs_* left out), by name. */
function describe(registry: Registry, metrics: ScrapedJson): MetricDescription[] {
  const declared = new Map(
    registry.getMetricsAsArray().map((metric) => {
      const labelNames = (metric as { labelNames?: readonly string[] }).labelNames ?? [];
      return [metric.name, labelNames] as const;
    }),
  );
  return metrics
    .filter((metric) => metric.name.startsWith('kreplay_'))
    .map((metric) => {
      const labels = new Map<string, Set<string>>(
        (declared.get(metric.name) ?? []).map((label) => [label, new Set<string>()]),
      );
      for (const { labels: values } of metric.values)
        for (const [label, value] of Object.entries(values))
          if (label !== 'le') labels.get(label)?.add(String(value));
      return { name: metric.name, type: String(metric.type), help: metric.help, labels };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
}

/** The agent's metrics, every option on. */
async function agentMetrics(): Promise<MetricDescription[]> {
  const metrics = new AgentMetrics({ shipping: true, exportingOtlp: true });
  const readings: AgentReadings = {
    counters: () => ZEROS,
    ringPeakFill: () => 0,
    storeBytes: () => 0,
    clockErrorNs: () => 0,
    ship: () => ZEROS,
    otlp: () => ZEROS,
  };
  metrics.attach(readings);
  return describe(metrics.registry, await metrics.scrapeJson());
}

/** The daemon's metrics, its replay sessions and query workers watched. */
async function daemonMetrics(): Promise<MetricDescription[]> {
  const metrics = new DaemonMetrics();
  metrics.watchSessions({ list: () => [] } as unknown as ReplaySessions);
  metrics.watchQueries(() => ({ workers: 0, busy: 0, queued: 0, busySeconds: 0 }));
  metrics.watchStreams({ cuts: 0 });
  return describe(metrics.registry, await metrics.registry.getMetricsAsJSON());
}

function table(metrics: MetricDescription[]): string[] {
  const rows = metrics.map(({ name, type, help, labels }) => {
    const labelCells = [...labels].map(([label, values]) =>
      values.size === 0 ? `\`${label}\`` : `\`${label}\`: ${[...values].map((v) => `\`${v}\``).join(', ')}`,
    );
    return `| \`${name}\` | ${type} | ${cell(labelCells.join('; '))} | ${cell(help)} |`;
  });
  return ['| metric | type | labels | what |', '| --- | --- | --- | --- |', ...rows];
}

export async function metricsPage(): Promise<string> {
  return [
    `${HEADER('the agent and daemon metric registries (agent/metrics/agent-metrics.ts, daemon/metrics/daemon-metrics.ts)')}# Metrics reference`,
    '',
    "Every metric kreplay serves in the Prometheus text format, with each label's values as the code gives them. The agent also serves prom-client's `process_*` and `nodejs_*` metrics, less the event-loop delay histogram's gauges (`nodejs_eventloop_lag_{min,max,mean,stddev,p50,p90,p99}_seconds`: sampled every 10 ms they cost an idle agent 40% of its main thread, and read the sampling period); `nodejs_eventloop_lag_seconds`, measured at each scrape, stays. The daemon serves kreplay's own metrics only.",
    '',
    '## Agent (`kreplay agent --metrics-listen`)',
    '',
    'The `kreplay_agent_ship*` metrics are served with `--ship` only, the `kreplay_agent_otlp_*` ones with `--otlp` only.',
    '',
    ...table(await agentMetrics()),
    '',
    "## Daemon (`GET /metrics` on the daemon's listener)",
    '',
    ...table(await daemonMetrics()),
    '',
  ].join('\n');
}
