/**
 * HotSpot's dynamic attach, done by the agent itself (no JDK tool at run time): a `.attach_pid<pid>`
 * file in the JVM's /tmp and a SIGQUIT make the JVM open its attach socket `/tmp/.java_pid<pid>`
 * (owner-only; the JVM accepts a peer of its own euid and egid, or root), on which one command is
 * sent in protocol 1 (`1\0load\0instrument\0false\0<jar>=<args>\0`) and its answer read to the end.
 * Both files are reached through /proc/<pid>/root (a container's /tmp), named with the JVM's pid
 * in its own namespace. Nothing listens on the agent's side.
 */
import { closeSync, constants, fchownSync, lstatSync, openSync, unlinkSync } from 'node:fs';
import { createConnection } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** How long the JVM is given to open its attach socket after SIGQUIT, and to answer the command. */
const SOCKET_WAIT_MS = 5000;
const ANSWER_WAIT_MS = 10_000;
const POLL_MS = 50;

export interface AttachTarget {
  pid: number;
  /** its pid in its own PID namespace */
  nspid: number;
  uid: number;
  gid: number;
}

/** A step of the handshake that failed, with why. */
export class AttachError extends Error {}

/** The attach socket, once the JVM listens on it (owned by the JVM's user: a planted file is not trusted). */
function attachSocket(target: AttachTarget): string | null {
  const path = `/proc/${target.pid}/root/tmp/.java_pid${target.nspid}`;
  try {
    const st = lstatSync(path);
    return st.isSocket() && st.uid === target.uid ? path : null;
  } catch {
    return null;
  }
}

/** Makes the JVM start its attach listener (if it has not) and returns its socket's path. */
export async function openAttachListener(target: AttachTarget): Promise<string> {
  const ready = attachSocket(target);
  if (ready) return ready;
  const trigger = `/proc/${target.pid}/root/tmp/.attach_pid${target.nspid}`;
  let made = false;
  try {
    // O_EXCL: never through a link another user planted in /tmp; a file already there (the JVM's
    // user's own attach under way) serves as well
    const fd = openSync(
      trigger,
      constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW,
      0o600,
    );
    made = true;
    try {
      fchownSync(fd, target.uid, target.gid);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST')
      throw new AttachError(`could not make ${trigger}: ${(err as Error).message}`);
  }
  try {
    process.kill(target.pid, 'SIGQUIT');
    for (const end = performance.now() + SOCKET_WAIT_MS; performance.now() < end;) {
      await sleep(POLL_MS);
      const socket = attachSocket(target);
      if (socket) return socket;
    }
    throw new AttachError(`its attach socket did not open within ${SOCKET_WAIT_MS} ms of SIGQUIT`);
  } finally {
    if (made) {
      try {
        unlinkSync(trigger);
      } catch {
        // the JVM removed it
      }
    }
  }
}

/** The bytes of one protocol-1 command (its arguments: three, empty when absent). */
export function attachCommand(name: string, args: string[]): Buffer {
  const words = ['1', name, ...args, '', '', ''].slice(0, 5);
  if (words.some((w) => w.includes('\0'))) throw new AttachError('an attach argument holds a NUL byte');
  return Buffer.from(words.map((w) => `${w}\0`).join(''), 'utf8');
}

/**
 * What the JVM answered a `load`: its first line is 0 when the command ran, then the agent's
 * result, 0 (or `return code: 0`) when it loaded; null when loaded, else why not.
 */
export function loadFailure(answer: string): string | null {
  const [status, ...rest] = answer.split('\n');
  const result = rest.join('\n').trim();
  if (status?.trim() !== '0') return `the JVM refused the command: ${answer.trim() || 'no answer'}`;
  if (result === '' || /^(return code: )?0$/.test(result)) return null;
  return `the JVM could not load the hook: ${result.slice(0, 400)}`;
}

/** Sends one command on the attach socket and resolves with the whole answer. */
export function sendAttachCommand(socket: string, command: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const conn = createConnection(socket);
    conn.setTimeout(ANSWER_WAIT_MS, () =>
      conn.destroy(new AttachError(`no answer on its attach socket within ${ANSWER_WAIT_MS} ms`)),
    );
    conn.on('data', (chunk: Buffer) => chunks.push(chunk));
    conn.once('error', (err) => reject(err instanceof AttachError ? err : new AttachError(err.message)));
    conn.once('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    conn.end(command);
  });
}
