/**
 * The Node hook (agent/runtimes/node/hook.js) in a real express server that evaluated the hook's
 * expression itself (no agent: the kernel's side is modelled by reading the slot and the mailbox
 * where the kernel would). Requests run interleaved, 64 at a time, and every callback each one
 * leaves (a timer, setImmediate, nextTick, fs and fs.promises, a client socket's connect and data,
 * its body's data, a listener on an emitter shared by all requests) must read its own request's
 * unit in the slot, never another's (a stale unit is a wrong transaction), and a timer of the
 * server's own must read none. Each request signals exactly one OPEN and one CLOSE, the CLOSE
 * before the program's own `close` listeners run, stored in the mailbox with no checked Buffer write
 * (word stores, as the slot's unit; main's hook made three a signal); and the hook gives the
 * program's response no listener (main's hook added a `close` listener to each one).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HOOK_SIGNAL, hookExpression } from '../../agent/runtimes/node/hook-signal';
import { waitFor } from '../support/wait';

const MAIL = HOOK_SIGNAL.mailboxAt;
const SERVER = `
'use strict';
const express = require(${JSON.stringify(require.resolve('express'))});
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const { EventEmitter } = require('node:events');
// each signal the hook sends, as the kernel reads it at getpriority: [op, unit]
const signals = [];
let slot = null;
const getPriority = os.getPriority;
os.getPriority = (pid) => {
  if (slot) signals.push([slot.readUInt32LE(${MAIL + HOOK_SIGNAL.opAt}), slot.readUInt32LE(${MAIL + HOOK_SIGNAL.unitAt})]);
  return getPriority(pid);
};
const installed = process.env.HOOKED === '1' ? ${hookExpression({ mailbox: true })} : null;
if (installed) slot = globalThis[Symbol.for('kreplay.node-hook')].slot;
// the hook's checked Buffer writes once installed: a signal's op and the mailbox's length are plain
// word stores, as the slot's unit is (main's hook made three checked writes a signal)
let checkedWrites = 0;
const writeUInt32LE = Buffer.prototype.writeUInt32LE;
Buffer.prototype.writeUInt32LE = function () {
  checkedWrites++;
  return Reflect.apply(writeUInt32LE, this, arguments);
};
const unit = () => (slot ? slot.readUInt32LE(${HOOK_SIGNAL.unitAt}) : 0);

// a timer of the server's own, made before any request: it runs in no unit
let idleRuns = 0;
const idleUnits = new Set();
const idle = setInterval(() => {
  idleRuns++;
  idleUnits.add(unit());
}, 1);
const echo = net.createServer((socket) => socket.pipe(socket)).listen(0, '127.0.0.1');
// an emitter every request listens on and emits on: a listener runs in the emitting request's unit
const bus = new EventEmitter();
bus.setMaxListeners(0);
let busCalls = 0;
const busWrong = [];
const closes = new Map();

const app = express();
app.get('/listeners', (req, res) => res.json({ close: res.listenerCount('close'), finish: res.listenerCount('finish') }));
app.post('/work', (req, res) => {
  const mine = unit();
  const seen = {};
  let pending = 9;
  const done = (what) => {
    seen[what] = unit();
    if (--pending === 0) res.json({ mine, seen });
  };
  const listener = (emitter) => {
    busCalls++;
    if (unit() !== emitter) busWrong.push([unit(), emitter]);
  };
  bus.emit('tick', mine);
  bus.on('tick', listener);
  res.on('close', () => {
    bus.off('tick', listener);
    closes.set(mine, { unit: unit(), closesBefore: signals.filter(([op, u]) => op === ${HOOK_SIGNAL.close} && u === mine).length });
  });
  req.on('data', () => (seen.data = unit()));
  req.on('end', () => done('end'));
  setTimeout(() => done('timeout'), Math.floor(Math.random() * 4));
  setImmediate(() => done('immediate'));
  process.nextTick(() => done('nextTick'));
  fs.stat(__filename, () => done('fs'));
  fs.promises.readFile(__filename).then(() => done('fsPromise'));
  const socket = net.connect(echo.address().port, '127.0.0.1', () => {
    seen.connect = unit();
    socket.write('x');
  });
  socket.once('data', () => {
    socket.end();
    done('socketData');
  });
  socket.on('close', () => done('socketClose'));
  Promise.resolve().then(() => done('microtask'));
});
app.get('/stats', (req, res) => {
  clearInterval(idle);
  res.json({ idleRuns, idleUnits: [...idleUnits], busCalls, busWrong, signals, closes: [...closes], checkedWrites });
});
echo.on('listening', () => {
  const server = app.listen(0, '127.0.0.1', () => console.log(server.address().port + ' ' + installed));
});
`;

interface Server {
  process: ChildProcess;
  port: number;
}
let dir: string;
const servers: Server[] = [];
async function start(hooked: boolean): Promise<Server> {
  const child = spawn(process.execPath, [join(dir, 'server.js')], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, HOOKED: hooked ? '1' : '0', KREPLAY_NODE_HOOK: 'off' },
  });
  let output = '';
  child.stdout!.on('data', (b: Buffer) => (output += b.toString()));
  const server = {
    process: child,
    port: Number(await waitFor(() => /^(\d+) /.exec(output)?.[1], { what: 'the port' })),
  };
  servers.push(server);
  return server;
}
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-hook-callbacks-'));
  writeFileSync(join(dir, 'server.js'), SERVER);
});
afterAll(async () => {
  for (const { process: child } of servers) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

const traced = (i: number): Record<string, string> => ({
  traceparent: `00-${(i + 1).toString(16).padStart(32, '0')}-${'0'.repeat(15)}1-01`,
  'x-request-id': `kr-callbacks-${i}`,
});
async function json<T>(port: number, path: string, init: RequestInit = {}): Promise<T> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, init);
  return (await response.json()) as T;
}

test.each([1, 64])(
  'at %i concurrent requests, every callback a request leaves reads its own unit, a timer of the server none, and each request signals one OPEN and one CLOSE',
  async (concurrency) => {
    const { port } = await start(true);
    const rounds = 2;
    const results: { mine: number; seen: Record<string, number> }[] = [];
    for (let round = 0; round < rounds; round++)
      results.push(
        ...(await Promise.all(
          Array.from({ length: concurrency }, (_, i) =>
            json<{ mine: number; seen: Record<string, number> }>(port, '/work', {
              method: 'POST',
              headers: traced(round * concurrency + i),
              body: 'a body',
            }),
          ),
        )),
      );
    const units = results.map((r) => r.mine);
    expect(units.every((u) => u > 0)).toBe(true);
    expect(new Set(units).size).toBe(results.length);
    for (const { mine, seen } of results) {
      const keys = [
        'connect',
        'data',
        'end',
        'fs',
        'fsPromise',
        'immediate',
        'microtask',
        'nextTick',
        'socketClose',
        'socketData',
        'timeout',
      ];
      expect(seen).toEqual(Object.fromEntries(keys.map((key) => [key, mine])));
    }
    // each response has closed (its close listener ran) before /stats reads them
    const stats = await waitFor(
      async () => {
        const s = await json<{
          idleRuns: number;
          idleUnits: number[];
          busCalls: number;
          busWrong: number[][];
          signals: [number, number][];
          closes: [number, { unit: number; closesBefore: number }][];
          checkedWrites: number;
        }>(port, '/stats');
        return s.closes.length === results.length ? s : undefined;
      },
      { what: 'every response closed' },
    );
    expect(stats.idleRuns).toBeGreaterThan(0);
    expect(stats.idleUnits).toEqual([0]);
    expect(stats.busWrong).toEqual([]);
    if (concurrency > 1) expect(stats.busCalls).toBeGreaterThan(0);
    const byUnit = new Map<number, number[]>();
    for (const [op, unit] of stats.signals) byUnit.set(unit, [...(byUnit.get(unit) ?? []), op]);
    expect([...byUnit.keys()].sort((a, b) => a - b)).toEqual([...units].sort((a, b) => a - b));
    for (const ops of byUnit.values()) expect(ops).toEqual([HOOK_SIGNAL.open, HOOK_SIGNAL.close]);
    // the program's close listener runs in the request's unit, after its CLOSE
    for (const [unit, close] of stats.closes) expect(close).toEqual({ unit, closesBefore: 1 });
    // two signals a request, each stored without a checked Buffer write
    expect(stats.signals).toHaveLength(2 * results.length);
    expect(stats.checkedWrites).toBe(0);
  },
);

test("the hook gives the program's response no listener of its own", async () => {
  const [plain, hooked] = await Promise.all([start(false), start(true)]);
  const listeners = await json(plain.port, '/listeners', { headers: traced(1) });
  expect(await json(hooked.port, '/listeners', { headers: traced(2) })).toEqual(listeners);
});
