/**
 * The hostile local user of the inspector tests: inspector-poller.py as uid 65534 without groups,
 * behind an optional prefix (nsenter into a container's network namespace), started and polling.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { waitFor } from './wait';

export const NOBODY = 65534;
const POLLER = join(__dirname, 'inspector-poller.py');

export interface Poller {
  child: ChildProcess;
  /** what it printed so far ("LIST url", "SESSION {answer}" lines) */
  output(): string;
  /** SIGTERM, then the counts it prints (attempts, refused, closed, lists, sessions) */
  stop(): Promise<Record<string, number>>;
}

/** Starts the poller on `port` and resolves once it polls; the caller kills `child` at its end. */
export async function startPoller(port: number, prefix: string[] = []): Promise<Poller> {
  const [command, ...args] = [
    ...prefix,
    'setpriv',
    `--reuid=${NOBODY}`,
    `--regid=${NOBODY}`,
    '--clear-groups',
    '/usr/bin/python3',
    POLLER,
    String(port),
  ];
  const child = spawn(command!, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  await waitFor(() => /^polling$/m.test(out) || undefined, { what: 'the poller polling' });
  return {
    child,
    output: () => out,
    stop: async () => {
      child.kill('SIGTERM');
      const line = await waitFor(() => /^\{.*\}$/m.exec(out)?.[0], { what: "the poller's counts" });
      return JSON.parse(line) as Record<string, number>;
    },
  };
}
