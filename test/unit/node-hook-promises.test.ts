/**
 * The Node hook (agent/runtimes/node/hook.js) and promises, in a real Node http server that
 * evaluated the hook's expression itself (no agent: the signals fail or find no program, as the
 * hook allows): the unit slot the kernel reads says each promise continuation's request, read by
 * the server's handlers in the continuations, and the hook leaves the program's promises as they
 * were (async_hooks' own promise tracking gave each one an async id in two symbol properties).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HOOK_SIGNAL, hookExpression } from '../../agent/runtimes/node/hook-signal';
import { waitFor } from '../support/wait';

// A server whose handlers report the slot's unit (low 32 bits: the units here are small) where
// they run: /wait awaits a promise that a later /wake resolves (from its own request), /outside
// resolves a promise whose continuation was registered before any request.
const SERVER = `
'use strict';
const http = require('node:http');
const installed = ${hookExpression({ mailbox: true })};
const slot = globalThis[Symbol.for('kreplay.node-hook')].slot;
const unit = () => slot.readUInt32LE(${HOOK_SIGNAL.unitAt});
const waiting = [];
let wake;
const woken = new Promise((resolve) => (wake = resolve));
let outsideUnit = -1;
woken.then(() => (outsideUnit = unit()));
http
  .createServer(async (req, res) => {
    const first = unit();
    if (req.url === '/wait') {
      const promise = new Promise((resolve) => waiting.push(resolve));
      console.log('waiting');
      // the promise a continuation settles is the one async_hooks tracked
      const then = promise.then(unit);
      const afterWake = await then;
      await new Promise((resolve) => setTimeout(resolve, 1));
      const afterTimer = unit();
      await null;
      res.end(JSON.stringify({ first, afterWake, afterTimer, afterAwait: unit(), symbols: Object.getOwnPropertySymbols(then).length }));
    } else if (req.url === '/wake') {
      waiting.shift()();
      wake();
      await null;
      res.end(JSON.stringify({ first, afterAwait: unit() }));
    } else {
      res.end(JSON.stringify({ outsideUnit, installed }));
    }
  })
  .listen(0, '127.0.0.1', function () {
    console.log(this.address().port);
  });
`;

let dir: string;
let server: ChildProcess;
let port: number;
let output = '';
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-hook-promises-'));
  writeFileSync(join(dir, 'server.js'), SERVER);
  server = spawn(process.execPath, [join(dir, 'server.js')], { stdio: ['ignore', 'pipe', 'inherit'] });
  server.stdout!.on('data', (b: Buffer) => (output += b.toString()));
  port = Number(await waitFor(() => /^(\d+)\n/.exec(output)?.[1]));
});
afterAll(async () => {
  const exited = new Promise((resolve) => server.once('exit', resolve));
  server.kill('SIGKILL');
  await exited;
  rmSync(dir, { recursive: true, force: true });
});

const TRACED = {
  traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
  'x-request-id': 'kr-promises',
};
async function get(path: string): Promise<Record<string, number | string>> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { headers: TRACED });
  return (await response.json()) as Record<string, number | string>;
}

test("each promise continuation runs in its own request's unit, whoever resolved it, and the program's promises keep no property of the hook's", async () => {
  const waited = get('/wait');
  // /wake, a request of its own, resolves /wait's promise once it waits
  await waitFor(() => output.includes('waiting\n'), { what: '/wait pending' });
  const woke = await get('/wake');
  const wait = await waited;
  expect(typeof wait.first).toBe('number');
  expect(wait.first).toBeGreaterThan(0);
  expect(woke.first).toBeGreaterThan(0);
  expect(woke.first).not.toBe(wait.first);
  expect(wait).toEqual({
    first: wait.first,
    afterWake: wait.first,
    afterTimer: wait.first,
    afterAwait: wait.first,
    symbols: 0,
  });
  expect(woke.afterAwait).toBe(woke.first);
  // registered before any request: no unit, though /wake's handler resolved it
  expect(await get('/outside')).toEqual({ outsideUnit: 0, installed: `kreplay-node-hook ${server.pid}` });
});
