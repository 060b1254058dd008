/** Runs a command under strace and reads back the calls it completed, per thread. */
import { execFile, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { constants } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { waitFor } from './wait';

const run = promisify(execFile);

/** A call strace saw return: [syscall, fd, size asked, ret], ret a negative errno for a failure. */
export type StraceLine = [name: string, fd: number, size: number, ret: number];

/**
 * `strace -ff -e trace=<calls>` of `argv`, its files in `dir`: each thread's completed calls by tid.
 * A call the kernel restarts ("= ? ERESTARTSYS") is no line of its own: its restart is.
 */
export async function straced(
  dir: string,
  calls: string,
  argv: string[],
): Promise<{ out: string; byTid: Map<number, StraceLine[]> }> {
  const prefix = join(dir, `strace-${Date.now()}`);
  const { stdout } = await run(
    'strace',
    ['-ff', '-qq', '-e', `trace=${calls}`, '-e', 'signal=none', '-o', prefix, ...argv],
    {
      maxBuffer: 64 << 20,
    },
  );
  const byTid = new Map<number, StraceLine[]>();
  for (const file of readdirSync(dir).filter((f) => f.startsWith(basename(prefix) + '.'))) {
    const lines: StraceLine[] = [];
    for (const line of readFileSync(join(dir, file), 'utf8').split('\n')) {
      // 'sendto(3, "ab"..., 4096, 0, NULL, 0) = 4096', 'fdatasync(3) = 0' or 'write(4, ...) = -1 EAGAIN (...)'
      const m = /^(\w+)\((\d+)(.*)\)\s+= (-?\d+)(?: (E[A-Z0-9]+))?/.exec(line);
      if (!m) continue;
      const size = /^, (?:".*"(?:\.\.\.)?|\[.*\]), (\d+)/.exec(m[3]!);
      const errno = m[5] ? constants.errno[m[5] as keyof typeof constants.errno] : undefined;
      lines.push([m[1]!, Number(m[2]), size ? Number(size[1]) : 0, errno ? -errno : Number(m[4])]);
    }
    byTid.set(Number(file.slice(basename(prefix).length + 1)), lines);
  }
  return { out: stdout, byTid };
}

/**
 * `strace -f -xx -e trace=<calls>` attached to running processes, every thread of each, until
 * `stop`: its lines ("<tid> call(...) = ret", strings in hex), in `dir`.
 */
export async function straceAttached(
  dir: string,
  calls: string,
  pids: number[],
): Promise<{ stop: () => Promise<string[]> }> {
  const file = join(dir, `strace-${Date.now()}`);
  const child = spawn(
    'strace',
    [
      '-f',
      '-qq',
      '-xx',
      '-e',
      `trace=${calls}`,
      '-e',
      'signal=none',
      '-o',
      file,
      ...pids.flatMap((p) => ['-p', String(p)]),
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const tracer = (pid: number, tid: string) =>
    /^TracerPid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'))?.[1];
  try {
    await waitFor(
      () =>
        pids.every((pid) =>
          readdirSync(`/proc/${pid}/task`).every((tid) => tracer(pid, tid) === String(child.pid)),
        ),
      { timeoutMs: 10_000, what: `strace attached to every thread of ${pids.join(', ')}` },
    );
  } catch (err) {
    // a strace left attached would slow the server for the rest of the suite
    child.kill('SIGINT');
    await exited;
    throw err;
  }
  return {
    stop: async () => {
      child.kill('SIGINT');
      await exited;
      return readFileSync(file, 'utf8').split('\n');
    },
  };
}
