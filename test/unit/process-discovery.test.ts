/**
 * The one process discovery of the runtime hooks (agent/runtimes/discovery): which processes it
 * hands to which injector, and what it says and counts, with real processes in /proc. The Python
 * queuing is faked (the ptrace part is native/python/py_inject.cc's, tested on a real kernel in
 * attribution-python.test.ts); the Node injection is tested in attribution-node.test.ts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { mkdtempSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RuntimeClassifier } from '../../agent/runtimes/discovery/classify';
import { ProcessDiscovery } from '../../agent/runtimes/discovery/process-discovery';
import { exeIdentity } from '../../agent/runtimes/process-tree';
import { leaveAlone, runtimeInjectors } from '../../agent/runtimes/discovery/runtime-injectors';
import type {
  FinalResult,
  RuntimeInjector,
  RuntimeInjectors,
} from '../../agent/runtimes/discovery/runtime-hook';
import { NodeHookInjector } from '../../agent/runtimes/node/node-hooks';
import { PythonHookInjector } from '../../agent/runtimes/python/python-hooks';
import { nativeAddon, type NativeAddon, type NativePythonSymbols } from '../../core/native/addon';
import type { Logger } from '../../core/log/logger';
import { hookableEnv } from '../support/request-accuracy';
import { recordingLogger } from '../support/recording-logger';
import { waitFor } from '../support/wait';

const children: ChildProcess[] = [];
afterEach(() => children.splice(0).forEach((c) => c.kill('SIGKILL')));

/** A child that printed its first line (its runtime is up). */
async function started(command: string, args: string[], env: NodeJS.ProcessEnv = hookableEnv()) {
  const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  await new Promise((resolve) => child.stdout!.once('data', resolve));
  return child;
}

/** A child that runs until killed (spawn returns once it has exec'd). */
function spawnChild(command: string, args: string[]): number {
  const child = spawn(command, args, { stdio: 'ignore' });
  children.push(child);
  return child.pid!;
}

/** A Node program that idles until killed, once it is up. */
const node = async () =>
  (await started(process.execPath, ['-e', 'console.log("up"); setInterval(() => {}, 1000)'])).pid!;

/** A python3 that idles until killed, once its interpreter is up. */
const python = async (env?: NodeJS.ProcessEnv) =>
  (await started('/usr/bin/python3', ['-c', 'import time\nprint("up", flush=True)\ntime.sleep(60)'], env))
    .pid!;

/** Every runtime's injector with the Node and Python hooks off: the tests put in their own. */
const hooksOff = (log: Logger): RuntimeInjectors =>
  runtimeInjectors({
    nodeHook: false,
    pythonHook: false,
    followLibuv: () => undefined,
    addon: nativeAddon(),
    log,
  });

function discovery(
  include: number[],
  injectors: Partial<RuntimeInjectors>,
  ancestors: number[] = [],
  markJvm?: (pid: number) => void,
): { d: ProcessDiscovery; lines: string[] } {
  const lines: string[] = [];
  const log = recordingLogger((level, msg, f) => {
    if (include.includes(f?.pid as number)) lines.push(`${level} ${msg} pid=${String(f?.pid)}`);
  });
  const d = new ProcessDiscovery({
    injectors: {
      ...hooksOff(log),
      ...injectors,
    },
    classifier: new RuntimeClassifier(nativeAddon()),
    scope: (pid) => (include.includes(pid) ? null : 'not in this test'),
    log,
    ancestors: () => ancestors,
    ...(markJvm ? { markJvm } : {}),
  });
  return { d, lines };
}

/** A Python injector whose queuing answers `queue`, recording what it was asked. */
function fakeQueue(queue: (pid: number) => Promise<number>) {
  const queued: { pid: number; code: string }[] = [];
  const injector = new PythonHookInjector({
    pythonSymbols: (pid: number): NativePythonSymbols => nativeAddon().pythonSymbols(pid),
    queuePythonCode: (pid: number, _s: NativePythonSymbols, code: string) => {
      queued.push({ pid, code });
      return queue(pid);
    },
  });
  return { injector, queued };
}

describe('ProcessDiscovery', () => {
  it('never goes into a Node process above the agent (its supervisor, shell or CI runner), and says so', async () => {
    // hookable in every other way: only the agent's line keeps the hook out
    const child = await started(process.execPath, ['-e', 'console.log("up"); setInterval(() => {}, 1000)']);
    let stderr = '';
    child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    const node = new NodeHookInjector({
      followLibuv: () => {
        throw new Error('libuv followed in a process never hooked');
      },
      addon: nativeAddon(),
      log: recordingLogger(() => undefined),
    });
    const { d, lines } = discovery([child.pid!], { node }, [child.pid!]);
    await waitFor(async () => {
      await d.scanOnce();
      return d.counts.node.refused === 1;
    });
    await d.scanOnce();
    expect(d.counts.node).toMatchObject({ hooked: 0, refused: 1, failed: 0 });
    expect(lines).toEqual([
      `info left a Node process unattributed: it runs above the agent (its supervisor, shell or CI runner): the agent's own line is never hooked pid=${child.pid}`,
    ]);
    // no SIGUSR1 reached it: its inspector never opened
    expect(stderr).not.toContain('Debugger listening');
  });

  it('queues the Python hook once into a Python process in scope, and into no other', async () => {
    const [included, left] = [await python(), await python()];
    const sleeper = spawn('/bin/sleep', ['60']);
    children.push(sleeper);
    const { injector, queued } = fakeQueue(() => Promise.resolve(0));
    const { d, lines } = discovery([included, sleeper.pid!], { python: injector });
    // the interpreter may still be starting at the first look: a later scan queues it
    await waitFor(async () => {
      await d.scanOnce();
      return queued.length > 0;
    });
    await d.scanOnce();
    expect(queued.map((q) => q.pid)).toEqual([included]);
    expect(queued[0]!.code).toContain('_kreplay_python_hook_boot');
    // the others of the host (and of the tests before) are out of this test's scope
    expect(d.counts.python).toMatchObject({ hooked: 1, refused: 0, failed: 0 });
    expect(lines).toEqual([
      `info queued the Python hook (it runs at the interpreter's next check) pid=${included}`,
    ]);
    expect(left).not.toBe(included);
  });

  it('says once and counts a Python process left out of scope, and hooks it once it comes in', async () => {
    const pid = await python();
    let inScope = false;
    const { injector, queued } = fakeQueue(() => Promise.resolve(0));
    const lines: string[] = [];
    const log = recordingLogger((level, msg, f) => {
      if (f?.pid === pid) lines.push(`${level} ${msg}`);
    });
    const d = new ProcessDiscovery({
      injectors: {
        ...hooksOff(log),
        python: injector,
      },
      classifier: new RuntimeClassifier(nativeAddon()),
      scope: (p) => (p === pid && inScope ? null : 'it serves nothing'),
      log,
      ancestors: () => [],
    });
    await waitFor(async () => {
      await d.scanOnce();
      return lines.length > 0;
    });
    await d.scanOnce();
    await d.scanOnce();
    expect(queued).toEqual([]);
    inScope = true;
    await waitFor(async () => {
      await d.scanOnce();
      return queued.length > 0;
    });
    expect(lines).toEqual([
      'info left a Python process unhooked for now: it serves nothing',
      "info queued the Python hook (it runs at the interpreter's next check)",
    ]);
  });

  it('leaves a Python process that opted out, and says and counts one that refused', async () => {
    const optedOut = await python({ ...hookableEnv(), KREPLAY_PYTHON_HOOK: 'off' });
    const refusing = await python();
    const { injector, queued } = fakeQueue(() =>
      Promise.reject(
        Object.assign(new Error('ptrace refused: Operation not permitted'), { code: 'E_PY_INJECT_PERM' }),
      ),
    );
    const { d, lines } = discovery([optedOut, refusing], { python: injector });
    await waitFor(async () => {
      await d.scanOnce();
      return d.counts.python.refused === 2;
    });
    await d.scanOnce();
    expect(queued.map((q) => q.pid)).toEqual([refusing]);
    expect(d.counts.python).toMatchObject({ hooked: 0, refused: 2, failed: 0 });
    expect(lines.sort()).toEqual(
      [
        `info left a Python process unattributed: KREPLAY_PYTHON_HOOK=off in its environment pid=${optedOut}`,
        `info left a Python process unattributed: ptrace refused: Operation not permitted pid=${refusing}`,
      ].sort(),
    );
  });

  it('never goes into a Python process above the agent, and says so', async () => {
    const supervisor = await python();
    const { injector, queued } = fakeQueue(() => Promise.resolve(0));
    const { d, lines } = discovery([supervisor], { python: injector }, [supervisor]);
    await waitFor(async () => {
      await d.scanOnce();
      return d.counts.python.refused === 1;
    });
    expect(queued).toEqual([]);
    expect(lines).toEqual([
      `info left a Python process unattributed: it runs above the agent (its supervisor, shell or CI runner): the agent's own line is never hooked pid=${supervisor}`,
    ]);
  });

  it('tries again a Python process whose main thread had no safe point', async () => {
    const busy = await python();
    // the first queuing finds no safe point, the next one queues
    let tries = 0;
    const { injector, queued } = fakeQueue(() =>
      ++tries === 1
        ? Promise.reject(Object.assign(new Error('no stop'), { code: 'E_PY_INJECT_TIMEOUT' }))
        : Promise.resolve(0),
    );
    const { d } = discovery([busy], { python: injector });
    await waitFor(async () => {
      await d.scanOnce();
      return d.counts.python.hooked === 1;
    });
    expect(queued.map((q) => q.pid)).toEqual([busy, busy]);
  });

  it('asks again with backoff a Node process that waits on another program, beyond maxTries, says it once, and counts only its outcome', async () => {
    const pid = await node();
    const asked: number[] = [];
    // the port another program holds is free at the fourth ask
    const waiting: RuntimeInjector = {
      maxTries: 1,
      hookedMessage: 'hooked a Node process',
      inject: () =>
        Promise.resolve(
          asked.push(performance.now()) < 4
            ? { outcome: 'wait', reason: 'its inspector port (port 9229 is taken)' }
            : { outcome: 'hooked' },
        ),
    };
    const { d, lines } = discovery([pid], { node: waiting });
    await waitFor(
      async () => {
        await d.scanOnce();
        return d.counts.node.hooked === 1;
      },
      { timeoutMs: 20_000 },
    );
    await d.scanOnce();
    expect(asked).toHaveLength(4);
    // 1, 2, then 4 s between the asks (the scans come every few ms here)
    const gaps = asked.slice(1).map((at, i) => at - asked[i]!);
    expect(gaps.map((gap, i) => gap >= 1000 * 2 ** i)).toEqual([true, true, true]);
    expect(d.counts.node).toMatchObject({ hooked: 1, refused: 0, failed: 0 });
    expect(lines).toEqual([
      `info a Node process waits for its inspector port (port 9229 is taken); asked again with backoff for as long as it runs pid=${pid}`,
      `info hooked a Node process pid=${pid}`,
    ]);
  }, 30_000);

  it('counts a Node process whose hook is under way past the scan once its injector answers late, and asks it no more', async () => {
    const pid = await node();
    let late: ((result: FinalResult) => void) | undefined;
    const pending: RuntimeInjector = {
      maxTries: 1,
      hookedMessage: 'hooked a Node process',
      inject: (_found, answer) => {
        late = answer;
        return Promise.resolve({ outcome: 'pending' });
      },
    };
    const { d, lines } = discovery([pid], { node: pending });
    await waitFor(async () => {
      await d.scanOnce();
      return late !== undefined;
    });
    const answer = late!;
    late = undefined;
    await d.scanOnce();
    await d.scanOnce();
    expect({ asked: late, counts: d.counts.node, lines }).toMatchObject({
      asked: undefined,
      counts: { hooked: 0, refused: 0, failed: 0 },
      lines: [],
    });
    answer({ outcome: 'failed', reason: 'its inspector answered for pid 1' });
    expect(d.counts.node).toMatchObject({ hooked: 0, refused: 0, failed: 1 });
    expect(lines).toEqual([
      `warn could not hook a Node process: its inspector answered for pid 1; it stays unattributed pid=${pid}`,
    ]);
  });

  it('counts every Node process refused, with why, when the kernel cannot guard their inspectors', async () => {
    const pid = await node();
    const warnings: string[] = [];
    const unguarded = new NodeHookInjector({
      followLibuv: () => {
        throw new Error('libuv followed in a process never hooked');
      },
      addon: {
        InspectorGuard: class {
          constructor() {
            throw new Error('no cgroup v2 hierarchy');
          }
        } as unknown as NativeAddon['InspectorGuard'],
      },
      log: recordingLogger((level, msg, f) => {
        if (level === 'warn') warnings.push(`${msg} ${String(f?.error)}`);
      }),
    });
    unguarded.start();
    const { d, lines } = discovery([pid], { node: unguarded });
    await waitFor(async () => {
      await d.scanOnce();
      return d.counts.node.refused === 1;
    });
    await unguarded.stop();
    expect(warnings).toEqual([
      'no Node process is hooked: their inspectors cannot be guarded no cgroup v2 hierarchy',
    ]);
    expect(lines).toEqual([
      `info left a Node process unattributed: its inspector cannot be guarded (no cgroup v2 hierarchy) pid=${pid}`,
    ]);
  });

  it("starts and stops the injectors with itself (the Node hook's inspector guard)", async () => {
    const calls: string[] = [];
    const held: RuntimeInjector = {
      ...leaveAlone('refused', 'not in this test'),
      start: () => calls.push('start'),
      stop: async () => {
        await Promise.resolve();
        calls.push('stop');
      },
    };
    const { d } = discovery([], { node: held });
    d.start();
    expect(calls).toEqual(['start']);
    await d.stop();
    expect(calls).toEqual(['start', 'stop']);
  });

  it('counts a hook turned off as refused, with why, never silently', async () => {
    const pid = await python();
    const { d, lines } = discovery([pid], {
      python: leaveAlone('refused', 'the Python hook is off (--no-python-hook)'),
    });
    await waitFor(async () => {
      await d.scanOnce();
      return d.counts.python.refused === 1;
    });
    expect(lines).toEqual([
      `info left a Python process unattributed: the Python hook is off (--no-python-hook) pid=${pid}`,
    ]);
  });

  it("marks a JVM for the kernel once, out of the hooks' scope too, and no other process", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kreplay-jvm-'));
    const source = join(dir, 'Idle.java');
    writeFileSync(
      source,
      'class Idle { public static void main(String[] a) throws Exception { System.out.println("up"); Thread.sleep(60000); } }\n',
    );
    try {
      const [jvm, py] = [(await started('/usr/bin/java', [source])).pid!, await python()];
      const marked: number[] = [];
      // neither is in scope: the JVM is marked all the same, never hooked
      const { d } = discovery([], {}, [], (pid) => marked.push(pid));
      await waitFor(async () => {
        await d.scanOnce();
        return marked.includes(jvm);
      });
      await d.scanOnce();
      await d.scanOnce();
      // the host's other JVMs (other tests') may be marked too: only these two are this test's
      expect(marked.filter((pid) => pid === jvm || pid === py)).toEqual([jvm]);
      expect(d.counts.jvm.hooked).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe("the scan's cost on a busy host", () => {
    /**
     * A discovery that counts, for `pid` alone, its classifications and its executable's stats, and
     * its reads of the agent's ancestors; `lastPid`, `scope` and `changes` as given (default: the
     * kernel's, none, none).
     */
    function counting(
      pid: () => number,
      {
        lastPid,
        scope,
        changes,
      }: {
        lastPid?: () => number | null;
        scope?: (p: number) => string | null;
        changes?: () => number[] | null | undefined;
      } = {},
    ) {
      const looks = { classify: 0, stat: 0, runtime: '', ancestors: 0 };
      // the test's own process's outcomes: d.counts holds every process on the host (other Python servers too)
      const outcomes: string[] = [];
      const classifier = new RuntimeClassifier(nativeAddon());
      const d = new ProcessDiscovery({
        injectors: hooksOff(recordingLogger(() => undefined)),
        classifier: {
          classify(p, exeId) {
            const found = classifier.classify(p, exeId);
            if (p === pid()) {
              looks.classify++;
              looks.runtime = found?.runtime ?? '';
            }
            return found;
          },
        },
        exeIdentity(p) {
          if (p === pid()) looks.stat++;
          return exeIdentity(p);
        },
        scope: scope ?? (() => 'not in this test'),
        log: recordingLogger((_level, _msg, fields) => {
          if (fields?.pid === pid()) outcomes.push(String(fields.outcome));
        }),
        ancestors: () => {
          looks.ancestors++;
          return [];
        },
        ...(lastPid ? { lastPid } : {}),
        ...(changes ? { changes } : {}),
      });
      return { d, looks, outcomes };
    }

    /** The walks of /proc while `run` runs. */
    async function walksOfProc(run: () => Promise<void>): Promise<number> {
      const readdir = jest.spyOn(fs, 'readdirSync');
      try {
        await run();
        return readdir.mock.calls.filter(([path]) => path === '/proc').length;
      } finally {
        readdir.mockRestore();
      }
    }

    describe("by the kernel's news of processes (started, exec'd, exited)", () => {
      it('walks /proc at its first scan and then once a minute of scans, and asks a settled process nothing', async () => {
        const pid = spawnChild('/bin/sleep', ['60']);
        // the last pid moves at every scan, as on a busy host: without the news each would walk
        let last = 1000;
        const { d, looks } = counting(() => pid, { changes: () => [], lastPid: () => last++ });
        const walks = await walksOfProc(async () => {
          for (let i = 0; i < 59; i++) await d.scanOnce();
        });
        expect(walks).toBe(1);
        // first seen, then its six looks without a runtime settle it, and nothing after
        expect(looks).toEqual({ classify: 6, stat: 6, runtime: '', ancestors: 0 });
        expect(await walksOfProc(() => d.scanOnce())).toBe(1);
        expect(looks).toMatchObject({ classify: 6, stat: 7 });
      });

      it("looks at the program a settled process exec'd at the second scan after the news", async () => {
        const child = spawn(
          '/bin/sh',
          ['-c', 'read line; exec /usr/bin/python3 -c "import time; time.sleep(60)"'],
          { env: hookableEnv(), stdio: ['pipe', 'ignore', 'ignore'] },
        );
        children.push(child);
        const pid = child.pid!;
        let news: number[] = [];
        const { d, looks } = counting(() => pid, {
          changes: () => news.splice(0),
        });
        // past the tenth scan, where a walk without the news asks every process whether it exec'd
        for (let i = 0; i < 10; i++) await d.scanOnce();
        expect(looks).toEqual({ classify: 6, stat: 6, runtime: '', ancestors: 0 });
        child.stdin!.write('go\n');
        await waitFor(() => readlinkSync(`/proc/${pid}/exe`).includes('python'));
        news = [pid];
        const walks = await walksOfProc(async () => {
          await d.scanOnce(); // named: looked at anew from the next scan
          expect(looks.classify).toBe(6);
          await d.scanOnce();
        });
        expect(walks).toBe(0);
        expect(looks).toMatchObject({ classify: 7, stat: 7, runtime: 'python' });
      });

      it('forgets a process the news names once it is gone, and walks /proc when news was lost', async () => {
        const child = spawn('/bin/sleep', ['60'], { stdio: 'ignore' });
        children.push(child);
        const pid = child.pid!;
        let news: number[] | null = [];
        const { d, looks } = counting(() => pid, {
          changes: () => {
            const out = news;
            news = [];
            return out;
          },
        });
        for (let i = 0; i < 3; i++) await d.scanOnce();
        expect(looks).toMatchObject({ classify: 2, stat: 2 });
        child.kill('SIGKILL');
        await waitFor(() => !fs.existsSync(`/proc/${pid}`));
        news = [pid];
        await d.scanOnce();
        await d.scanOnce(); // looked at once more: gone, forgotten
        expect(looks).toMatchObject({ classify: 2, stat: 3 });
        for (let i = 0; i < 5; i++) await d.scanOnce();
        expect(looks).toMatchObject({ classify: 2, stat: 3 });
        // news lost: the scan walks /proc and asks every process whether it exec'd
        news = null;
        expect(await walksOfProc(() => d.scanOnce())).toBe(1);
      });

      it('scans as without the news where the kernel cannot give it', async () => {
        const pid = spawnChild('/bin/sleep', ['60']);
        const { d, looks } = counting(() => pid, { changes: () => undefined, lastPid: () => 7 });
        for (let i = 0; i < 27; i++) await d.scanOnce();
        expect(looks).toEqual({ classify: 6, stat: 8, runtime: '', ancestors: 0 });
      });
    });

    it("looks at a process from its second scan, and asks a settled one whether it exec'd at one scan in ten", async () => {
      // spawn returns once the child has exec'd: it is sleep from the first scan on
      const pid = spawnChild('/bin/sleep', ['60']);
      const { d, looks } = counting(() => pid);
      await d.scanOnce();
      expect(looks).toEqual({ classify: 0, stat: 0, runtime: '', ancestors: 0 });
      // its six looks without a runtime settle it
      for (let i = 0; i < 6; i++) await d.scanOnce();
      expect(looks).toEqual({ classify: 6, stat: 6, runtime: '', ancestors: 0 });
      for (let i = 0; i < 20; i++) await d.scanOnce();
      // the agent's ancestors are read only for a process about to be handed its injector
      expect(looks).toEqual({ classify: 6, stat: 8, runtime: '', ancestors: 0 });
    });

    it('finds the program a settled process exec, within ten scans', async () => {
      const child = spawn(
        '/bin/sh',
        ['-c', 'read line; exec /usr/bin/python3 -c "import time; time.sleep(60)"'],
        {
          env: hookableEnv(),
          stdio: ['pipe', 'ignore', 'ignore'],
        },
      );
      children.push(child);
      const pid = child.pid!;
      const { d, looks } = counting(() => pid);
      for (let i = 0; i < 7; i++) await d.scanOnce();
      expect(looks.classify).toBe(6);
      child.stdin!.write('go\n');
      await waitFor(() => readlinkSync(`/proc/${pid}/exe`).includes('python'));
      for (let scans = 0; looks.runtime === '' && scans < 10; scans++) await d.scanOnce();
      expect(looks).toMatchObject({ classify: 7, runtime: 'python' });
    });

    it('finds a process started after it at the scan after the last pid moved, and looks at it at the one after', async () => {
      let late = 0;
      let last = 1000;
      const { d, looks } = counting(() => late, { lastPid: () => last });
      for (let i = 0; i < 12; i++) await d.scanOnce();
      late = spawnChild('/usr/bin/python3', ['-c', 'import time; time.sleep(60)']);
      last = 1001;
      await d.scanOnce();
      await d.scanOnce();
      expect(looks).toMatchObject({ classify: 1, runtime: 'python' });
    });

    it('looks at a process the scope left out long once in ten scans, and asks it nothing between', async () => {
      const pid = await python();
      const { d, looks, outcomes } = counting(() => pid, { lastPid: () => 7 });
      // first seen, then 21 looks out of scope (a server binds its port once it has started)
      for (let i = 0; i < 22; i++) await d.scanOnce();
      expect(looks).toMatchObject({ classify: 1, stat: 21, runtime: 'python' });
      expect(outcomes).toEqual(['out_of_scope']);
      // scans 23 to 52: looked at at 32, 42 and 52, and asked whether it exec'd at the full walks (30, 40, 50)
      for (let i = 0; i < 30; i++) await d.scanOnce();
      expect(looks).toMatchObject({ classify: 1, stat: 27 });
      expect(looks.ancestors).toBe(0);
    });

    it('looks again at a process whose pid was handed out since the last walk: another one', async () => {
      const pid = spawnChild('/bin/sleep', ['60']);
      let last = pid - 1;
      const { d, looks } = counting(() => pid, { lastPid: () => last });
      for (let i = 0; i < 7; i++) await d.scanOnce();
      expect(looks).toMatchObject({ classify: 6, stat: 6 });
      // the kernel handed out pid again (wrapped around): what was tracked there is another process
      last = pid;
      await d.scanOnce(); // first seen anew
      await d.scanOnce();
      expect(looks).toMatchObject({ classify: 7, stat: 7 });
    });
  });
});
