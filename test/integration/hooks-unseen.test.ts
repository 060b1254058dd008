/**
 * What a program sees of the agent's Python and Node hooks: nothing (real kernel, real agent). Each
 * program runs twice in the test cgroup, once hooked and once opted out (KREPLAY_*_HOOK=off: a run
 * without the agent's hook), and gives the same stdout, stderr, files and exit status. A hooked run
 * starts its work only once the agent said it hooked the process (a line on its stdin tells it to
 * go). The attack: a daemon closes every descriptor and opens its log, a Node server closes its
 * files and opens its own, which take the hooks' old descriptor numbers; the hooks signal through
 * a descriptor no file can have, so not one byte of theirs lands in the programs' files, and the
 * requests stay attributed.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RecordType } from '../../core/model';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, type TestCgroup } from '../support/cgroup';
import { hookableEnv, nodeHookLine, pythonHookLine, traceparentOf } from '../support/request-accuracy';
import { readStoredEvents } from '../support/store-rows';
import { waitFor } from '../support/wait';

const PYTHON = '/usr/bin/python3';
const RUNTIMES = join(__dirname, '..', 'support', 'runtimes');

let dir: string;
let store: string;
let cgroup: TestCgroup;
let agent: AgentProcess;
let runs = 0;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-unseen-'));
  store = join(dir, 'data', 'unseen.db');
  cgroup = createCgroup(`kreplay-unseen-${process.pid}`);
  agent = await startAgent([
    '--data-dir',
    join(dir, 'data'),
    '--node',
    'unseen',
    '--cgroup-id',
    String(cgroup.id),
    // programs that serve nothing too: the default scope would leave them alone (hook-scope.test.ts)
    '--hook-include',
    `cgroup-id:${cgroup.id}`,
  ]);
}, 60_000);

afterAll(async () => {
  await agent?.stop();
  cgroup?.remove();
  rmSync(dir, { recursive: true, force: true });
});

type Runtime = 'python' | 'node';

interface Outcome {
  stdout: string;
  stderr: string;
  status: number | null;
  signal: NodeJS.Signals | null;
  /** the files the program left in its working directory, by name */
  files: Record<string, string>;
}

/** The program's environment: hookable, or opted out of the hook (a run without the agent's hook). */
function envFor(hooked: boolean): NodeJS.ProcessEnv {
  const env = hookableEnv();
  if (!hooked) Object.assign(env, { KREPLAY_PYTHON_HOOK: 'off', KREPLAY_NODE_HOOK: 'off' });
  return env;
}

/** Waits for the agent's word on `pid` and expects it hooked. */
async function expectHooked(runtime: Runtime, pid: number): Promise<void> {
  const line = runtime === 'python' ? pythonHookLine(agent, pid) : nodeHookLine(agent, pid);
  const said = await line.catch((err: Error) => {
    throw new Error(`${err.message}; the agent said:\n${agent.output().split('\n').slice(-15).join('\n')}`);
  });
  expect(said).toMatch(runtime === 'python' ? /queued the Python hook/ : /hooked a Node process/);
}

/**
 * Node's inspector prints these on the program's stderr while the hook goes in (the agent's
 * inspector session); they are not the hook's doing and are dropped before comparing.
 */
const INSPECTOR_LINE =
  /^(Debugger listening on ws:\/\/\S+|For help, see: https:\/\/nodejs\.org\/\S+|Debugger attached\.|Debugger ending on ws:\/\/\S+)\n/gm;

/**
 * Runs `command args` in the cgroup, in a directory of its own; once it is hooked (or at once when
 * opted out), `during` runs (it may talk to the program: `port` is the first line it printed, when
 * `serves`), then `input` goes to its stdin, which is closed. Resolves when it exits.
 */
async function run(
  runtime: Runtime,
  hooked: boolean,
  command: string,
  args: string[],
  options: { input?: string; serves?: (port: number, cwd: string) => Promise<void> } = {},
): Promise<Outcome> {
  const cwd = join(dir, `run-${++runs}`);
  mkdirSync(cwd);
  const child = spawn('/bin/sh', ['-c', `${cgroup.enter} "$@"`, 'sh', command, ...args], {
    cwd,
    env: envFor(hooked),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
    child.once('exit', (code, signal) => resolve([code, signal])),
  );
  try {
    if (hooked) await expectHooked(runtime, child.pid!);
    child.stdin.end(options.input ?? 'go\n');
    if (options.serves) {
      const port = await waitFor(() => /^(\d+)\n/.exec(stdout)?.[1], { what: `${command}'s port` });
      await options.serves(Number(port), cwd);
    }
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  const [status, signal] = await exited;
  const files: Record<string, string> = {};
  for (const name of readdirSync(cwd).sort()) files[name] = readFileSync(join(cwd, name), 'latin1');
  // a server's first line is its port, another at each run
  if (options.serves) stdout = stdout.replace(/^\d+\n/, '');
  return { stdout, stderr: stderr.replace(INSPECTOR_LINE, ''), status, signal, files };
}

/** Runs the program opted out, then hooked; both outcomes, which the caller expects equal. */
async function bothWays(
  runtime: Runtime,
  command: string,
  args: string[],
  options: Parameters<typeof run>[4] = {},
): Promise<{ without: Outcome; hooked: Outcome }> {
  const without = await run(runtime, false, command, args, options);
  const hooked = await run(runtime, true, command, args, options);
  return { without, hooked };
}

/** GET `path` on a connection of its own, with the request's x-request-id and a traceparent. */
function get(port: number, path: string, id = 'none', n = 0): Promise<string> {
  return new Promise((resolve, reject) => {
    request(
      {
        host: '127.0.0.1',
        port,
        path,
        agent: false,
        headers: { 'x-request-id': id, traceparent: traceparentOf(n) },
      },
      (res) => {
        let text = '';
        res
          .setEncoding('utf8')
          .on('data', (chunk: string) => (text += chunk))
          .once('end', () => resolve(text));
      },
    )
      .once('error', reject)
      .end();
  });
}

describe('a hooked program sees nothing of the hook (real kernel)', () => {
  it('a Python daemon that closes every descriptor and opens its log: the log is as without the agent, each line its request', async () => {
    const ids = Array.from(
      { length: 24 },
      (_, i) => ['boom', 'raise', 'daemon'][Math.min(i % 8, 2)] + `-${i}`,
    );
    const states: string[] = [];
    const serves = async (port: number) => {
      for (const [i, id] of ids.entries()) await get(port, `/r/${id}`, id, i + 1);
      states.push(await get(port, '/state'));
      expect(await get(port, '/quit')).toBe('bye');
    };
    const { without, hooked } = await bothWays(
      'python',
      PYTHON,
      [join(RUNTIMES, 'closerange-daemon.py'), '.'],
      {
        serves,
      },
    );
    const expected = ids.map((id) => `${id} from a pool thread\n${id} from the loop\n`).join('');
    expect(without.files['daemon.log']).toBe(expected);
    // its log, aiohttp's tracebacks of the failed pool jobs on stderr, what it sees of itself
    expect(hooked).toEqual(without);
    expect(without.stderr).toMatch(/ValueError: boom in boom-8\n[^]*KeyError: 'raise-9'\n/);
    expect(states[1]).toBe(states[0]);
    expect(JSON.parse(states[0]!)).toMatchObject({ log_fd: 3, fds: expect.arrayContaining(['daemon.log']) });
    // and the hook still works after the daemon closed everything: each line carries its request
    const log = `${dir}/run-${runs}/daemon.log`;
    const writes = await waitFor(
      () => {
        const events = readStoredEvents(store, `e.type = ${RecordType.SysWrite} AND t.value = '${log}'`);
        return events.length >= 2 * ids.length && events;
      },
      { what: 'the log writes stored' },
    );
    const lines = hooked.files['daemon.log']!.split('\n').slice(0, -1);
    expect(writes.map((e) => e.txn)).toEqual(lines.map((line) => line.split(' ')[0]));
  }, 120_000);

  it('a Node server that closes its files and opens its own on every number it closed: its files are as without the agent', async () => {
    const paths = Array.from({ length: 16 }, (_, i) => `/w/${i}`);
    const serves = async (port: number) => {
      for (const [i, path] of paths.entries()) expect(await get(port, path, `node-${i}`, i + 1)).toBe('ok');
      expect(await get(port, '/quit')).toBe('bye');
    };
    const { without, hooked } = await bothWays(
      'node',
      process.execPath,
      [join(RUNTIMES, 'fd-reuse-server.js'), '.'],
      {
        serves,
      },
    );
    // how many files it needed to take every number back depends on the holes its descriptors
    // had (the inspector's closed sockets leave some): each file is what a run without the agent wrote
    const expected = paths.map((path) => `${path}\n${path} later\n`).join('');
    expect(new Set(Object.values(without.files))).toEqual(new Set([expected]));
    expect(new Set(Object.values(hooked.files))).toEqual(new Set([expected]));
    expect({ ...hooked, files: {} }).toEqual({ ...without, files: {} });
  }, 120_000);

  const pythonPrograms: [string, string][] = [
    [
      'sleeps and writes a file',
      `import sys, time
sys.stdin.readline()
time.sleep(0.05)
with open("slept.txt", "w") as f:
    f.write("slept\\n")
print("slept", file=sys.stderr)
print("done")`,
    ],
    [
      'pipes, a child through a pipe and a shell pipeline',
      `import os, subprocess, sys
sys.stdin.readline()
r, w = os.pipe()
os.write(w, b"through a pipe\\n")
os.close(w)
print(os.read(r, 100).decode(), end="")
print(subprocess.run(["cat"], input=b"through cat\\n", capture_output=True).stdout.decode(), end="")
print(subprocess.run("printf 'b\\\\na\\\\n' | sort", shell=True, capture_output=True, text=True).stdout, end="")
print(sorted(os.listdir("/proc/self/fd"), key=int))`,
    ],
    [
      'select on a pipe',
      `import os, select, sys
sys.stdin.readline()
r, w = os.pipe()
print(select.select([r], [], [], 0.02))
os.write(w, b"x")
print(select.select([r], [], [], 1) == ([r], [], []))
p = select.poll(); p.register(r, select.POLLIN)
print(p.poll(1000) == [(r, select.POLLIN)])`,
    ],
    [
      'setitimer and its signal handler',
      `import signal, sys
sys.stdin.readline()
ticks = []
signal.signal(signal.SIGALRM, lambda n, f: ticks.append(f.f_code.co_name))
signal.setitimer(signal.ITIMER_REAL, 0.005, 0.005)
while len(ticks) < 5:
    signal.pause()
signal.setitimer(signal.ITIMER_REAL, 0)
print(ticks)`,
    ],
    [
      'multiprocessing',
      `import multiprocessing, sys
def square(n):
    return n * n
if __name__ == "__main__":
    sys.stdin.readline()
    with multiprocessing.Pool(2) as pool:
        print(pool.map(square, range(10)))
    p = multiprocessing.Process(target=print, args=("from a child",))
    p.start(); p.join()
    print(p.exitcode)`,
    ],
    [
      'sys.settrace and a traceback',
      `import sys, traceback
sys.stdin.readline()
calls = []
def tracer(frame, event, arg):
    calls.append((event, frame.f_code.co_name))
    return tracer
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
sys.settrace(tracer)
fib(4)
sys.settrace(None)
print(calls)
def inner():
    raise KeyError("inner")
try:
    inner()
except KeyError:
    traceback.print_exc()
print(len(traceback.extract_stack()))
raise SystemExit(3)`,
    ],
    [
      "tracebacks through a pool and an event loop's callbacks, and a KeyboardInterrupt out of one",
      `import asyncio, concurrent.futures, sys, traceback
sys.stdin.readline()
def job():
    raise ValueError("in a job")
with concurrent.futures.ThreadPoolExecutor(1) as pool:
    done = pool.submit(job)
    concurrent.futures.wait([done])
    try:
        done.result()
    except ValueError:
        traceback.print_exc()
def interrupt():
    raise KeyboardInterrupt
async def main():
    loop = asyncio.get_running_loop()
    try:
        await loop.run_in_executor(None, job)
    except ValueError:
        traceback.print_exc()
    loop.call_soon(lambda: 1 / 0)
    await asyncio.sleep(0.01)
    loop.call_soon(interrupt)
    await asyncio.sleep(1)
asyncio.run(main())`,
    ],
  ];

  it.each(pythonPrograms)(
    'Python: %s',
    async (_name, code) => {
      const { without, hooked } = await bothWays('python', PYTHON, ['-c', code]);
      // it ran to its end: an exit status, or the SIGINT an uncaught KeyboardInterrupt ends in
      expect(without.status ?? without.signal).not.toBeNull();
      expect(hooked).toEqual(without);
    },
    60_000,
  );

  it('Python: json.tool reads what it is given, good and bad', async () => {
    for (const input of ['{"b": [1, 2], "a": "x"}\n', '{"a": }\n']) {
      const { without, hooked } = await bothWays('python', PYTHON, ['-m', 'json.tool'], { input });
      expect(hooked).toEqual(without);
    }
  }, 60_000);

  it('Python: a REPL, with a traceback, sys.meta_path and sys.modules', async () => {
    const input = `import sys, asyncio, concurrent.futures
print([f.__name__ if isinstance(f, type) else type(f).__name__ for f in sys.meta_path])
print([m for m in sys.modules if "kreplay" in m], sorted(__import__("os").listdir("/proc/self/fd")))
1/0
def f():
    raise ValueError("in f")

f()
import json; print(json.dumps({"a": 1}))
exit(3)
`;
    const { without, hooked } = await bothWays('python', PYTHON, ['-i', '-q'], { input });
    expect(without.stderr).toMatch(/ZeroDivisionError/);
    expect(without.status).toBe(3);
    expect(hooked).toEqual(without);
  }, 60_000);

  const nodePrograms: [string, string][] = [
    [
      'node -e: timers, a file and a child through a pipe',
      `const fs = require('node:fs');
process.stdin.once('data', () => {
  process.stdin.destroy();
  setTimeout(() => {
    fs.writeFileSync('timer.txt', 'after a timer\\n');
    const out = require('node:child_process').execFileSync('cat', { input: 'through cat\\n' });
    process.stdout.write(out);
    console.error('to stderr');
    try { null.x; } catch (e) { console.log(e.stack.split('\\n').slice(0, 2).join('\\n')); }
    process.exitCode = 4;
  }, 20);
});`,
    ],
    [
      'worker_threads',
      `const { Worker } = require('node:worker_threads');
process.stdin.once('data', () => {
  process.stdin.destroy();
  const w = new Worker("const { parentPort } = require('node:worker_threads'); require('node:fs').writeFileSync('worker.txt', 'from a worker\\\\n'); parentPort.postMessage([1, 2, 3].map((n) => n * n));", { eval: true });
  w.once('message', (m) => console.log(m));
  w.once('exit', (code) => console.log('worker exited', code));
});`,
    ],
  ];

  it.each(nodePrograms)(
    'Node: %s',
    async (_name, code) => {
      const { without, hooked } = await bothWays('node', process.execPath, ['-e', code]);
      expect(without.status ?? without.signal).not.toBeNull();
      expect(hooked).toEqual(without);
    },
    60_000,
  );

  it('Node: a REPL', async () => {
    const input = `const fs = require('node:fs')
fs.writeFileSync('repl.txt', 'from the repl\\n')
Object.keys(globalThis).filter((key) => /kreplay/i.test(key))
null.x
1 + 1
`;
    const { without, hooked } = await bothWays('node', process.execPath, ['-i'], { input });
    expect(without.stdout).toMatch(/> Uncaught TypeError/);
    expect(hooked).toEqual(without);
  }, 60_000);
});
