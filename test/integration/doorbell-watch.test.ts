/**
 * The replay clock's doorbell as the main thread hears it (native/doorbell_watch.cc): a real pipe,
 * polled by the addon on the loop. Each arrival of bytes is one call with the pipe read empty, a
 * lost writer is said once and stops the poll, and only ref() keeps a process alive.
 */
import { spawn } from 'node:child_process';
import { closeSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { nativeAddon } from '../../core/native/addon';

const PIPE_BYTES = 65_536;
const ADDON = join(__dirname, '../../native/build/Release/kreplay_native.node');

/** Resolves with the watch's calls once `until` holds of them. */
function watch(readFd: number, until: (calls: (Error | undefined)[]) => boolean, onCall?: () => void) {
  const calls: (Error | undefined)[] = [];
  let done: () => void = () => undefined;
  const reached = new Promise<void>((resolve) => (done = resolve));
  const doorbell = new (nativeAddon().DoorbellWatch)(readFd, (error) => {
    calls.push(error);
    onCall?.();
    if (until(calls)) done();
  });
  return { doorbell, calls, reached };
}

describe('DoorbellWatch', () => {
  it('calls once a burst of bytes, and reads the pipe empty before it calls', async () => {
    const [readFd, writeFd] = nativeAddon().doorbellPipe();
    let room = -1;
    const { doorbell, calls, reached } = watch(
      readFd,
      (c) => c.length === 2,
      () => {
        // the first call's burst was read whole: a pipe's whole capacity fits again
        if (room < 0) room = writeSync(writeFd, Buffer.alloc(PIPE_BYTES));
      },
    );
    try {
      for (let i = 0; i < 100; i++) writeSync(writeFd, Buffer.of(1));
      await reached;
      expect(room).toBe(PIPE_BYTES);
      expect(calls).toEqual([undefined, undefined]);
    } finally {
      doorbell.close();
      closeSync(writeFd);
    }
  });

  it('says once, with E_PIPE, that the write end closed, and stops polling', async () => {
    const [readFd, writeFd] = nativeAddon().doorbellPipe();
    const { doorbell, calls, reached } = watch(readFd, (c) => c.some((e) => e !== undefined));
    closeSync(writeFd);
    await reached;
    // a stopped watch is closed again without harm, and the loop turns without another call
    doorbell.close();
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ code: 'E_PIPE', message: "the doorbell pipe's write end closed" });
  });

  it('refuses what is not a descriptor', () => {
    const { DoorbellWatch } = nativeAddon();
    // none of them may be taken for descriptor 0, this process's stdin, which the watch would own
    for (const notOne of [-1, Number.NaN, 0.5, 2 ** 40])
      expect(() => new DoorbellWatch(notOne, () => undefined)).toThrow(`${notOne} is no descriptor`);
  });

  /** A child whose stdin (a blocking pipe from here) is its doorbell; it prints each call. */
  function child(keepAlive: boolean) {
    const script = `
      const { DoorbellWatch } = require(${JSON.stringify(ADDON)});
      const doorbell = new DoorbellWatch(0, (error) => {
        console.log(error ? 'closed ' + error.code : 'rang');
      });
      ${keepAlive ? 'doorbell.ref();' : ''}
      console.log('watching');`;
    const proc = spawn(process.execPath, ['-e', script], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let out = '';
    const waiters: (() => void)[] = [];
    proc.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      for (const waiter of waiters.splice(0)) waiter();
    });
    const lines = (n: number) =>
      new Promise<string[]>((resolve) => {
        const check = () => {
          const got = out.split('\n').filter(Boolean);
          if (got.length >= n) resolve(got);
          else waiters.push(check);
        };
        check();
      });
    const exited = new Promise<number | null>((resolve) => proc.on('exit', resolve));
    return { proc, lines, exited };
  }

  it('keeps a process alive only while ref()ed, and lets it end once its writer is gone', async () => {
    const kept = child(true);
    await kept.lines(1);
    kept.proc.stdin.write('x');
    expect(await kept.lines(2)).toEqual(['watching', 'rang']);
    kept.proc.stdin.end();
    expect(await kept.exited).toBe(0);
    expect(await kept.lines(3)).toEqual(['watching', 'rang', 'closed E_PIPE']);

    const unrefd = child(false);
    expect(await unrefd.exited).toBe(0);
    expect(await unrefd.lines(1)).toEqual(['watching']);
    unrefd.proc.stdin.destroy();
  });
});
