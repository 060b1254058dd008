/**
 * Every benchmark `make bench` runs, by name, with the topic bench/RESULTS.md files its figures
 * under and the arguments it takes (each is bench/<name>.ts, run as dist/bench/<name>.js, or a
 * script).
 * test/unit/bench-registry.test.ts keeps this list, the bench/ entry points and the runs
 * RESULTS.md cites in step.
 */

/** The topics of bench/RESULTS.md's index, in its order. */
export const BENCH_TOPICS = [
  'write and read overhead',
  'ingest',
  'query',
  'replay',
  'runtime hooks',
  'server cost',
  'fleet',
  'daemon',
] as const;

export type BenchTopic = (typeof BENCH_TOPICS)[number];

export interface Bench {
  topic: BenchTopic;
  /** its positional arguments, as its usage line gives them ('' for none) */
  args: string;
  /** a shell script run from the checkout's root (bench/<name>.sh), not dist/bench/<name>.js */
  script?: true;
}

export const BENCHES = {
  overhead: { topic: 'write and read overhead', args: '[writes] [rounds] [mode,mode...] [read iterations]' },
  'read-program-cost': { topic: 'write and read overhead', args: '[reads] [runs]' },
  ingest: { topic: 'ingest', args: '' },
  retention: { topic: 'ingest', args: '' },
  'store-write': { topic: 'ingest', args: '[batches] [rounds] [requests a batch]' },
  query: { topic: 'query', args: '' },
  'clickhouse-limit-by': { topic: 'query', args: '' },
  timeline: { topic: 'query', args: '[runs]' },
  replay: { topic: 'replay', args: '' },
  'replay-dense': { topic: 'replay', args: '[events] [rounds]' },
  'replay-reads': { topic: 'replay', args: '[events] [rounds]' },
  'replay-client': { topic: 'replay', args: '[rounds]' },
  'replay-stream-parse': { topic: 'replay', args: '[rounds]' },
  exec: { topic: 'replay', args: '[pass-through writes] [rounds]' },
  'exec-relay': { topic: 'replay', args: '[rounds]' },
  'exec-cause': { topic: 'replay', args: '[rounds]' },
  incident: { topic: 'replay', args: '[rounds]' },
  'incident-start': { topic: 'replay', args: '[events] [runs]' },
  'node-overhead': { topic: 'runtime hooks', args: '[rounds=5] [seconds=5] [connections=64]' },
  'python-hook': { topic: 'runtime hooks', args: '[rounds=5] [seconds=5] [connections=64]' },
  'jvm-hook': { topic: 'runtime hooks', args: '[rounds=5] [seconds=5] [connections=64]' },
  'python-servers': { topic: 'runtime hooks', args: '[rounds=3] [seconds=5] [connections=32]' },
  'go-overhead': { topic: 'server cost', args: '[rounds=3] [seconds=5]' },
  'tls-overhead': { topic: 'server cost', args: '[rounds=3] [seconds=5]' },
  'unfollowed-cost': { topic: 'server cost', args: '[rounds=3] [seconds=5]' },
  'go-probe-hits': { topic: 'server cost', args: "[rounds=3] [ops=200000] [other tree's root]" },
  'server-cost': {
    topic: 'server cost',
    args: '[rounds=3] [seconds=5] [servers=go,node,aiohttp,gunicorn] [pace=CxMS|close]',
  },
  fleet: { topic: 'fleet', args: '' },
  otlp: { topic: 'fleet', args: '[writes=500000] [rounds=3] [rate=100000] [writes per trace=500]' },
  'daemon-load': { topic: 'daemon', args: '[rounds]' },
  'event-page-cost': { topic: 'daemon', args: '[runs=4] [requests=4000]' },
  'doorbell-ring': { topic: 'daemon', args: '[rounds=3] [rings=5000]' },
  // the agent's /metrics, scraped as a Prometheus server scrapes it (issue 13: kreplay in production)
  'metrics-scrape': { topic: 'daemon', args: '', script: true },
} as const satisfies Record<string, Bench>;

export type BenchName = keyof typeof BENCHES;

export function isBenchName(name: string): name is BenchName {
  return Object.hasOwn(BENCHES, name);
}
