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
 * The incident is served by the daemon stand-in (test/support/exec-daemon.ts:
 * real replay sessions), as node stores of this branch hold no sys_read yet.
 *   make bench BENCH=exec-relay, or node dist/bench/exec-relay.js [rounds]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from '../core/repo-root';
import {
  incidentCall,
  startExecDaemon,
  type ExecDaemon,
  type IncidentEvent,
} from '../test/support/exec-daemon';
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
const STRACE_CALL: Record<Kind, string> = { fsync: 'fdatasync', connect: 'connect', response: 'recvfrom' };

async function main(): Promise<void> {
  const rounds = Number(process.argv[2]) || 3;
  const loop = benchLoop('callloop');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-bench-relay-'));
  const up = await upstream();
  const peer = `tcp 127.0.0.1:${up.port}`;
  // on tmpfs where there is one: the measured time is then the hold, not the disk's
  const file = path.join(fs.existsSync('/dev/shm') ? fs.mkdtempSync('/dev/shm/kreplay-bench-') : dir, 'wal');
  const responses = (txn: string, ns: bigint, count: number): IncidentEvent[] =>
    Array.from({ length: count }, (_, k) => ({
      ...incidentCall(txn, k, 0.01, 'sys_read' as 'sys_write', peer, 'socket', {
        syscall: 'recvfrom',
        bytes: 64,
      }),
      response_ns: ns,
    }));
  const events: IncidentEvent[] = [...responses('relay', 0n, 1)];
  for (const ms of DELAYS_MS) {
    for (let k = 0; k < CALLS_PER_DELAY; k++) {
      events.push(incidentCall(`fsync-${ms}`, k, ms, 'sys_fsync', file, 'file', { syscall: 'fdatasync' }));
      events.push(
        incidentCall(`connect-${ms}`, k, ms, 'sys_connect', peer, 'socket', { syscall: 'connect' }),
      );
    }
    events.push(...responses(`response-${ms}`, BigInt(ms * MS), CALLS_PER_DELAY));
  }
  const daemon: ExecDaemon = await startExecDaemon(events, dir);
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
