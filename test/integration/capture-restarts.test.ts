/**
 * A call the kernel restarts is one call: a program blocked in a pipe write
 * and a socket read, each interrupted by a SIGCHLD whose handler was
 * installed with SA_RESTART (the kernel restarts both), records exactly the
 * calls strace sees it complete, each blocked call once, from its first
 * entry (the handler's own write inside its span) to its final result.
 * So is a TCP connect whose SYN a full queue dropped, restarted while it waits.
 * A read a handler without SA_RESTART interrupts returns EINTR: one event,
 * with -4, counted as the capture's doing when its process sent the signal.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { SYSCALL_FLAGS, syscallName } from '../../core/model';
import type { DecodedRecord, DecodedSyscall } from '../support/decode-records';
import { straced } from '../support/strace';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';
import { captureAround, describeKernel } from './capture-harness';

const dir = useTempDir();
const BLOCKED_WRITE = 65536;
const REPLY = 5;
const EINTR = -4;
const SYS_READ = 0;
/** ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND, ERESTART_RESTARTBLOCK: never seen by user space */
const RESTART_CODES = [-512, -513, -514, -516];

/** The thread's write and read events in the order they ended (strace's order). */
function endOrder(records: DecodedRecord[], tid: number): DecodedSyscall[] {
  return records
    .filter((r): r is DecodedSyscall => (r.type === 'sys_write' || r.type === 'sys_read') && r.tid === tid)
    .sort((a, b) => (a.startNs + a.durationNs < b.startNs + b.durationNs ? -1 : 1));
}

const endOf = (r: DecodedSyscall) => r.startNs + r.durationNs;

type Fds = [pid: number, pipe: number, socket: number, last: number, queued: number, waiting: number];

/** The waiter's pid and fds (data pipe, socket, last socket, the two connecting sockets) once it wrote them. */
function fds(file: string): Fds | undefined {
  const line = existsSync(file) ? readFileSync(file, 'utf8') : '';
  return line.endsWith('\n') ? (line.trim().split(' ').map(Number) as Fds) : undefined;
}

/** Whether `pid` is blocked in syscall `nr` on `fd` now. */
function blockedIn(pid: number, nr: number, fd: number): true | undefined {
  const [call, arg] = readFileSync(`/proc/${pid}/syscall`, 'utf8').split(' ');
  return Number(call) === nr && Number(arg) === fd ? true : undefined;
}

describeKernel('restarted calls (real kernel)', () => {
  it('records a write, a read and a connect a SIGCHLD interrupted (SA_RESTART) once each, from the first entry to the final result; an EINTR once', async () => {
    const waiter = join(dir.path, 'restart-waiter');
    execFileSync('cc', [
      '-O2',
      '-Wall',
      '-Werror',
      '-o',
      waiter,
      resolve(__dirname, '../support/restart-waiter.c'),
    ]);
    const fdsFile = join(dir.path, 'fds');
    const { records, counters, value } = await captureAround({ captureReads: true }, async () => {
      const traced = straced(dir.path, 'write,read', [waiter, fdsFile]);
      // its last read, blocked, ended by this process's SIGUSR1 (the capture's own, as the Node hook's)
      const [pid, , , lastFd] = await waitFor(() => fds(fdsFile), { what: "the waiter's fds" });
      await waitFor(() => blockedIn(pid, SYS_READ, lastFd), { what: 'the last read blocked' });
      process.kill(pid, 'SIGUSR1');
      return { ...(await traced), fds: await waitFor(() => fds(fdsFile)) };
    });
    const [pid, pipeFd, socketFd, lastFd, queuedFd, waitingFd] = value.fds;
    const name = (r: DecodedSyscall) => syscallName(r.syscall & ~SYSCALL_FLAGS);
    // (the loader's pread64 calls are no write nor read to strace)
    const mine = endOrder(records, pid).filter((r) => ['write', 'read'].includes(name(r)));
    // every call the program saw, as strace saw it complete: none more (no ERESTARTSYS), none less
    // (strace shows the read that returned EINTR as "= ? ERESTARTSYS" alone: its exit's value)
    const traced = value.byTid.get(pid)!.map(([call, fd, , ret]) => [call, fd, ret]);
    traced.push(['read', lastFd, EINTR]);
    expect(traced.filter(([call, fd]) => call === 'write' && fd === pipeFd).at(-1)).toEqual([
      'write',
      pipeFd,
      BLOCKED_WRITE,
    ]);
    expect(mine.map((r) => [name(r), r.fd, r.ret])).toEqual(traced);
    expect(mine.filter((r) => RESTART_CODES.includes(r.ret))).toEqual([]);

    const blockedWrite = mine.filter((r) => r.fd === pipeFd && r.count === BLOCKED_WRITE);
    const blockedRead = mine.filter((r) => r.fd === socketFd);
    expect(blockedWrite.map((r) => [name(r), r.ret])).toEqual([['write', BLOCKED_WRITE]]);
    expect(blockedRead.map((r) => [name(r), r.ret])).toEqual([['read', REPLY]]);
    // the connect whose SYN the full queue dropped: one event, 0, from its first entry (its SYN)
    const connects = records.filter((r): r is DecodedSyscall => r.type === 'sys_connect' && r.tid === pid);
    expect(connects.map((r) => [r.fd, r.ret])).toEqual([
      [queuedFd, 0],
      [waitingFd, 0],
    ]);
    // each handler's write (one byte to its notification pipe) ran inside the call it interrupted
    for (const call of [blockedWrite[0]!, blockedRead[0]!, connects[1]!]) {
      const handlers = mine.filter(
        (r) => name(r) === 'write' && r.ret === 1 && r.startNs > call.startNs && endOf(r) < endOf(call),
      );
      expect(handlers.length).toBeGreaterThanOrEqual(1);
    }
    expect(counters.restartedCall).toBeGreaterThanOrEqual(3);
    // the one signal this process sent: its read ended with EINTR, counted as the capture's doing
    expect(counters.agentInterruptedCall).toBe(1);
  });
});
