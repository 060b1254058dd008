/**
 * `kreplay replay --exec` beyond writes, on a real child (bench/callloop.c):
 *
 * 1. The relay's added latency: a 64-byte request/response loop on one
 *    connection, and a bulk download, against a loopback upstream (in this
 *    process), direct and under `kreplay replay --exec` with an incident whose
 *    responses from that upstream took 0 ns (so every connection goes through
 *    the relay and nothing is held): added µs per exchange (seccomp's
 *    pass-through of each send included, as users run it) and ms per MiB,
 *    rounds interleaved.
 * 2. Hold error for fsync, connect and response delays D: the child times each
 *    call (fdatasync; a blocking connect; a request until its response), under
 *    kreplay with an incident where each took D, and under
 *    `strace -f --inject=SYSCALL:delay_enter=D` on the same call (fdatasync,
 *    connect, recvfrom). Error = measured − D.
 *
 * The incidents are incident files (core/incident) in the data dir of the real
 * daemon (createDaemon, over HTTP), one per transaction.
 *   make bench BENCH=exec-relay, or node dist/bench/exec-relay.js [rounds]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { IncidentWriter } from '../core/incident';
import { silentLogger } from '../core/log/logger';
import type { ApiEvent } from '../core/model';
import { repoRoot } from '../core/repo-root';
import { createDaemon, type Daemon } from '../daemon/create-daemon';
import { benchLoop } from './bench-loops';
import { printTable } from './table';

const EXCHANGES = 2000;
const BULK_MIB = 64;
const DELAYS_MS = [1, 10, 50];
const CALLS_PER_DELAY = 30;
const MS = 1_000_000;

const log = (text: string) => process.stderr.write(`[exec-relay bench] ${text}\n`);

function run(argv: string[]): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve(out.trim().split('\n').map(Number))
        : reject(new Error(`${argv.join(' ')} exited ${code}: ${err.slice(-2000)}`)),
    );
  });
}

/** A loopback upstream: echoes each 64 bytes at once; "B" first: BULK_MIB MiB, then the end. */
async function upstream(): Promise<{ port: number; close(): void }> {
  const block = Buffer.alloc(1 << 20, 'u');
  const server = net.createServer((socket) => {
    socket.setNoDelay(true);
    let pending = 0;
    socket.once('data', function first(chunk: Buffer) {
      if (chunk[0] === 0x42) {
        let left = BULK_MIB;
        const pump = () => {
          while (left > 0) {
            left--;
            if (!socket.write(block)) return void socket.once('drain', pump);
          }
          socket.end();
        };
        return pump();
      }
      const echo = (data: Buffer) => {
        pending += data.length;
        while (pending >= 64) {
          pending -= 64;
          socket.write(block.subarray(0, 64));
        }
      };
      echo(chunk);
      socket.on('data', echo);
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as net.AddressInfo).port, close: () => server.close() };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)]!;
const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;
};
const fixed = (n: number, digits = 1) => n.toFixed(digits);
const range = (values: number[], digits = 1) =>
  `${fixed(Math.min(...values), digits)}..${fixed(Math.max(...values), digits)}`;

type Kind = 'fsync' | 'connect' | 'response';

/** A recorded call of the incident: the k-th of its transaction, 1 ms apart, taking `durationNs`. */
function recorded(
  txn: string,
  k: number,
  durationNs: bigint,
  eventType: string,
  target: string,
  kind: string,
  fields: Record<string, unknown>,
): ApiEvent {
  const T0 = 1_795_000_000_000_000_000n;
  // the file format carries every field of every type (contract 2): the model names sys_write's only
  return {
    event_id: `bench${txn}${k}`,
    event_type: eventType,
    timestamp_ns: T0 + BigInt(k) * 1_000_000n,
    duration_ns: durationNs,
    service_name: 'bench',
    transaction_id: txn,
    trace_id: null,
    node: 'bench-node',
    pid: 1,
    tid: 1,
    comm: 'incident',
    bytes: 0,
    fd: 3,
    ret: 0,
    target_kind: kind,
    target,
    ...fields,
  } as unknown as ApiEvent;
}

/** The daemon serves each transaction's calls from an incident file in its data dir. */
function writeIncidents(dataDir: string, byTxn: Map<string, ApiEvent[]>): void {
  fs.mkdirSync(path.join(dataDir, 'incidents'), { recursive: true });
  for (const [txn, events] of byTxn) {
    const writer = new IncidentWriter({ transactionId: txn, source: 'node-stores' });
    for (const event of events) writer.add(event);
    fs.writeFileSync(path.join(dataDir, 'incidents', `${txn}.kri`), writer.finish(null));
  }
}
const STRACE_CALL: Record<Kind, string> = { fsync: 'fdatasync', connect: 'connect', response: 'recvfrom' };

async function main(): Promise<void> {
  const rounds = Number(process.argv[2]) || 3;
  const loop = benchLoop('callloop');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-bench-relay-'));
  const up = await upstream();
  const peer = `tcp 127.0.0.1:${up.port}`;
  // on tmpfs where there is one: the measured time is then the hold, not the disk's
  const file = path.join(fs.existsSync('/dev/shm') ? fs.mkdtempSync('/dev/shm/kreplay-bench-') : dir, 'wal');
  const calls = (txn: string, count: number, each: (k: number) => ApiEvent): [string, ApiEvent[]] => [
    txn,
    Array.from({ length: count }, (_, k) => each(k)),
  ];
  const response = (txn: string, ns: bigint) => (k: number) =>
    recorded(txn, k, 10_000n, 'sys_read', peer, 'socket', {
      syscall: 'recvfrom',
      bytes: 64,
      response_ns: ns,
    });
  const incidents = new Map([calls('relay', 1, response('relay', 0n))]);
  for (const ms of DELAYS_MS) {
    const d = BigInt(ms * MS);
    incidents.set(
      ...calls(`fsync-${ms}`, CALLS_PER_DELAY, (k) =>
        recorded(`fsync-${ms}`, k, d, 'sys_fsync', file, 'file', { syscall: 'fdatasync' }),
      ),
    );
    incidents.set(
      ...calls(`connect-${ms}`, CALLS_PER_DELAY, (k) =>
        recorded(`connect-${ms}`, k, d, 'sys_connect', peer, 'socket', { syscall: 'connect' }),
      ),
    );
    incidents.set(...calls(`response-${ms}`, CALLS_PER_DELAY, response(`response-${ms}`, d)));
  }
  writeIncidents(dir, incidents);
  const daemon: Daemon = await createDaemon({ dataDir: dir, log: silentLogger });
  const kreplay = (txn: string, argv: string[]) => [
    process.execPath,
    path.join(repoRoot(), 'bin', 'kreplay.js'),
    'replay',
    txn,
    '--exec',
    '--server',
    daemon.url,
    '--',
    ...argv,
  ];
  const strace = (kind: Kind, ms: number, argv: string[]) => [
    'strace',
    '-f',
    '-qq',
    '-o',
    '/dev/null',
    '-e',
    `trace=${STRACE_CALL[kind]}`,
    `--inject=${STRACE_CALL[kind]}:delay_enter=${ms}ms`,
    ...argv,
  ];
  try {
    const exchange = { direct: [] as number[], relay: [] as number[] };
    const bulk = { direct: [] as number[], relay: [] as number[] };
    for (let round = 0; round < rounds; round++) {
      const argv = [loop, 'exchange', String(up.port), String(EXCHANGES)];
      exchange.direct.push(median(await run(argv)));
      exchange.relay.push(median(await run(kreplay('relay', argv))));
      const bulkArgv = [loop, 'bulk', String(up.port), String(BULK_MIB)];
      bulk.direct.push((await run(bulkArgv))[0]! / BULK_MIB);
      bulk.relay.push((await run(kreplay('relay', bulkArgv)))[0]! / BULK_MIB);
      log(`relay round ${round + 1}/${rounds} done`);
    }
    const addedUs = exchange.relay.map((ns, i) => (ns - exchange.direct[i]!) / 1000);
    const addedMs = bulk.relay.map((ns, i) => (ns - bulk.direct[i]!) / MS);
    printTable(
      `The relay: ${EXCHANGES} exchanges of 64 B on one connection (median per round), ${BULK_MIB} MiB downloaded; ${rounds} rounds, median (range)`,
      [
        [
          'µs per exchange',
          `${fixed(median(exchange.direct) / 1000)} (${range(exchange.direct.map((n) => n / 1000))})`,
          `${fixed(median(exchange.relay) / 1000)} (${range(exchange.relay.map((n) => n / 1000))})`,
          `${fixed(median(addedUs))} (${range(addedUs)})`,
        ],
        [
          'ms per MiB',
          `${fixed(median(bulk.direct) / MS, 2)} (${range(
            bulk.direct.map((n) => n / MS),
            2,
          )})`,
          `${fixed(median(bulk.relay) / MS, 2)} (${range(
            bulk.relay.map((n) => n / MS),
            2,
          )})`,
          `${fixed(median(addedMs), 2)} (${range(addedMs, 2)})`,
        ],
      ],
      ['', 'direct loopback', 'kreplay relay', 'added'],
    );

    const rows: (string | number)[][] = [];
    for (const kind of ['fsync', 'connect', 'response'] as Kind[]) {
      for (const ms of DELAYS_MS) {
        const argv =
          kind === 'fsync'
            ? [loop, 'fsync', file, String(CALLS_PER_DELAY)]
            : [loop, kind === 'connect' ? 'connect' : 'exchange', String(up.port), String(CALLS_PER_DELAY)];
        const errors = { kreplay: [] as number[], strace: [] as number[] };
        for (let round = 0; round < Math.min(rounds, 2); round++) {
          errors.kreplay.push(...(await run(kreplay(`${kind}-${ms}`, argv))).map((ns) => ns - ms * MS));
          errors.strace.push(...(await run(strace(kind, ms, argv))).map((ns) => ns - ms * MS));
        }
        const cell = (values: number[]) =>
          `${fixed(quantile(values, 0.5) / 1000)} / ${fixed(quantile(values, 0.99) / 1000)} / ${values.filter((e) => e < 0).length}`;
        rows.push([kind, `${ms} ms`, cell(errors.kreplay), cell(errors.strace)]);
      }
      log(`${kind} holds done`);
    }
    printTable(
      `Hold error (measured by the child − D, µs: p50 / p99 / calls early), ${CALLS_PER_DELAY} calls per D and round, ${Math.min(rounds, 2)} round(s)`,
      rows,
      ['call', 'D', 'kreplay', `strace --inject=…:delay_enter=D`],
    );
  } finally {
    up.close();
    await daemon.close();
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
