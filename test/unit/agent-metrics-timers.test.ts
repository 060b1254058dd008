/** What `--metrics-listen` costs the agent between scrapes: no timer that wakes it 100 times a second. */
import perfHooks from 'node:perf_hooks';
import { AgentMetrics, EVENT_LOOP_HISTOGRAM_GAUGES } from '../../agent/metrics/agent-metrics';

const MINUTE_MS = 60_000;

describe("the agent's metrics between scrapes", () => {
  let metrics: AgentMetrics;
  const resolutions: (number | undefined)[] = [];

  beforeAll(() => {
    const monitor = perfHooks.monitorEventLoopDelay;
    const spy = jest.spyOn(perfHooks, 'monitorEventLoopDelay').mockImplementation((options) => {
      resolutions.push(options?.resolution);
      return monitor(options);
    });
    try {
      metrics = new AgentMetrics({ shipping: false });
    } finally {
      spy.mockRestore();
    }
  });

  it("samples the event loop's delay at most once a minute (prom-client's default: every 10 ms)", () => {
    // prom-client starts exactly one histogram for its default metrics
    expect(resolutions).toHaveLength(1);
    expect(resolutions[0]).toBeGreaterThanOrEqual(MINUTE_MS);
  });

  it("serves the lag measured at the scrape, and not the histogram's gauges, which would read its period", async () => {
    const text = await metrics.registry.metrics();
    const names = new Set(
      text
        .split('\n')
        .filter((line) => line.startsWith('# TYPE '))
        .map((line) => line.split(' ')[2]),
    );
    expect(names.has('nodejs_eventloop_lag_seconds')).toBe(true);
    for (const name of EVENT_LOOP_HISTOGRAM_GAUGES) expect(names.has(name)).toBe(false);
    // the rest of Node's metrics are served as before
    expect(names.has('process_cpu_user_seconds_total')).toBe(true);
    expect(names.has('nodejs_heap_size_used_bytes')).toBe(true);
    expect(names.has('kreplay_agent_events_total')).toBe(true);
  });
});
