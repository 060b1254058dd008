/**
 * Which Node processes the agent's scan hooks (agent/runtimes/node/node-hooks.ts), with a real
 * Node child; the injection itself is tested on a real kernel in attribution-node.test.ts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { NodeHooks } from '../../agent/runtimes/node/node-hooks';
import { nativeAddon } from '../../core/native/addon';
import { hookableEnv } from '../support/request-accuracy';
import { recordingLogger } from '../support/recording-logger';
import { waitFor } from '../support/wait';

let child: ChildProcess | null = null;
afterAll(() => child?.kill('SIGKILL'));

describe('NodeHooks', () => {
  it('never goes into a process above the agent (its supervisor, shell or CI runner), and says so', async () => {
    // hookable in every other way: only the agent's line keeps the hook out
    child = spawn(process.execPath, ['-e', 'console.log("up"); setInterval(() => {}, 1000)'], {
      env: hookableEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    await new Promise((resolve) => child!.stdout!.once('data', resolve));
    let stderr = '';
    child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    const lines: string[] = [];
    const log = recordingLogger((level, msg, f) => {
      if (f?.pid === child!.pid) lines.push(`${level} ${msg} ${String(f?.reason)}`);
    });
    const hooks = new NodeHooks({
      wanted: (pid) => pid === child!.pid,
      followLibuv: () => {
        throw new Error('libuv followed in a process never hooked');
      },
      addon: nativeAddon(),
      log,
      scanMs: 50,
      ancestors: () => [child!.pid!],
    });
    hooks.start();
    try {
      await waitFor(() => hooks.counts.refused === 1);
    } finally {
      await hooks.stop();
    }
    expect(hooks.counts).toEqual({ hooked: 0, refused: 1, failed: 0 });
    expect(lines).toEqual([
      "info left a Node process unattributed it runs above the agent (its supervisor, shell or CI runner): the agent's own line is never hooked",
    ]);
    // no SIGUSR1 reached it: its inspector never opened
    expect(stderr).not.toContain('Debugger listening');
  });
});
