/**
 * Which processes the agent queues the Python hook into, and what it says and counts
 * (agent/runtimes/python/python-hooks.ts), with real processes in /proc and the queuing itself
 * faked: the ptrace part is native/python/py_inject.cc's, tested on a real kernel in
 * test/integration/attribution-python.test.ts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { PythonHooks } from '../../agent/runtimes/python/python-hooks';
import { nativeAddon, type NativePythonSymbols } from '../../core/native/addon';
import { hookableEnv } from '../support/request-accuracy';
import { recordingLogger } from '../support/recording-logger';
import { waitFor } from '../support/wait';

const children: ChildProcess[] = [];
afterAll(() => children.forEach((c) => c.kill('SIGKILL')));

/** A python3 that idles until killed, once its interpreter is up. */
async function python(env: NodeJS.ProcessEnv = hookableEnv()): Promise<number> {
  const child = spawn('/usr/bin/python3', ['-c', 'import time\nprint("up", flush=True)\ntime.sleep(60)'], {
    env,
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  children.push(child);
  await new Promise((resolve) => child.stdout!.once('data', resolve));
  return child.pid!;
}

function hooks(include: number[], queue: (pid: number) => Promise<number>, ancestors: number[] = []) {
  const lines: string[] = [];
  const log = recordingLogger((level, msg, f) => lines.push(`${level} ${msg} pid=${String(f?.pid)}`));
  const queued: { pid: number; code: string }[] = [];
  const native = {
    pythonSymbols: (pid: number): NativePythonSymbols => nativeAddon().pythonSymbols(pid),
    queuePythonCode: (pid: number, _s: NativePythonSymbols, code: string) => {
      queued.push({ pid, code });
      return queue(pid);
    },
  };
  const h = new PythonHooks({
    wanted: (pid) => include.includes(pid),
    log,
    native,
    ancestors: () => ancestors,
  });
  return { h, lines, queued };
}

describe('PythonHooks', () => {
  it('queues the hook once into a Python process the filters include, and into no other', async () => {
    const [included, left] = [await python(), await python()];
    const sleeper = spawn('/bin/sleep', ['60']);
    children.push(sleeper);
    const { h, lines, queued } = hooks([included, sleeper.pid!], () => Promise.resolve(0));
    // the interpreter may still be starting at the first look: a later scan queues it
    await waitFor(async () => {
      await h.scanOnce();
      return queued.length > 0;
    });
    await h.scanOnce();
    expect(queued.map((q) => q.pid)).toEqual([included]);
    expect(queued[0]!.code).toContain('_kreplay_python_hook_boot');
    expect(h.counts).toEqual({ hooked: 1, refused: 0, failed: 0 });
    expect(lines).toEqual([
      `info queued the Python hook (it runs at the interpreter's next check) pid=${included}`,
    ]);
    expect(left).not.toBe(included);
  });

  it('leaves a process that opted out, and says and counts one that refused', async () => {
    const optedOut = await python({ ...hookableEnv(), KREPLAY_PYTHON_HOOK: 'off' });
    const refusing = await python();
    const { h, lines, queued } = hooks([optedOut, refusing], () =>
      Promise.reject(
        Object.assign(new Error('ptrace refused: Operation not permitted'), { code: 'E_PY_INJECT_PERM' }),
      ),
    );
    await waitFor(async () => {
      await h.scanOnce();
      return h.counts.refused === 2;
    });
    await h.scanOnce();
    expect(queued.map((q) => q.pid)).toEqual([refusing]);
    expect(h.counts).toEqual({ hooked: 0, refused: 2, failed: 0 });
    expect(lines.sort()).toEqual(
      [
        `info no Python hook: KREPLAY_PYTHON_HOOK=off in its environment; its requests stay unattributed pid=${optedOut}`,
        `info no Python hook: ptrace refused: Operation not permitted; its requests stay unattributed pid=${refusing}`,
      ].sort(),
    );
  });

  it('never goes into a process above the agent (its supervisor, shell or CI runner), and says so', async () => {
    const supervisor = await python();
    const { h, lines, queued } = hooks([supervisor], () => Promise.resolve(0), [supervisor]);
    await waitFor(async () => {
      await h.scanOnce();
      return h.counts.refused === 1;
    });
    expect(queued).toEqual([]);
    expect(h.counts).toEqual({ hooked: 0, refused: 1, failed: 0 });
    expect(lines).toEqual([
      `info no Python hook: it runs above the agent (its supervisor, shell or CI runner): the agent's own line is never hooked; its requests stay unattributed pid=${supervisor}`,
    ]);
  });

  it('tries again a process whose main thread had no safe point', async () => {
    const busy = await python();
    let answers = [Promise.reject(Object.assign(new Error('no stop'), { code: 'E_PY_INJECT_TIMEOUT' }))];
    const { h, queued } = hooks([busy], () => answers.shift() ?? Promise.resolve(0));
    await waitFor(async () => {
      await h.scanOnce();
      return h.counts.hooked === 1;
    });
    expect(queued.map((q) => q.pid)).toEqual([busy, busy]);
    answers = [];
  });
});
