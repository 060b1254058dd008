/**
 * A network namespace's listening TCP sockets (agent/runtimes/node/listening-sockets.ts), which the
 * hooks' scope and the Node hook's inspector checks read: by sock_diag in the agent's own namespace,
 * the same facts as /proc/net/tcp{,6} give; from /proc/PID/net for a process in another namespace.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import {
  namespaceListening,
  parseListening,
  socketInodes,
  type ListeningSocket,
} from '../../agent/runtimes/node/listening-sockets';
import { nativeAddon } from '../../core/native/addon';

const servers: Server[] = [];
const clients: Socket[] = [];
let child: ChildProcess | undefined;

afterAll(() => {
  for (const c of clients) c.destroy();
  for (const s of servers) s.close();
  child?.kill('SIGKILL');
});

async function listen(host: string, ipv6Only = false): Promise<Server> {
  const server = createServer((socket) => clients.push(socket));
  await new Promise<void>((resolve) => server.listen({ port: 0, host, ipv6Only }, resolve));
  servers.push(server);
  return server;
}

const port = (server: Server) => (server.address() as { port: number }).port;
const byInode = (a: ListeningSocket, b: ListeningSocket) => a.inode - b.inode;
/** Ours among `sockets`: the host's other listeners come and go while the test reads. */
const ours = (sockets: ListeningSocket[]) => {
  const own = socketInodes(process.pid);
  return sockets.filter((s) => own.has(s.inode)).sort(byInode);
};
const fromProc = (pid: number | 'self') =>
  ['tcp', 'tcp6'].flatMap((t) => parseListening(readFileSync(`/proc/${pid}/net/${t}`, 'utf8')));

describe("a network namespace's listening TCP sockets", () => {
  it('by sock_diag in our namespace: the listeners /proc/net/tcp{,6} lists, with their ports and loopback, and no connection', async () => {
    const v4loop = await listen('127.0.0.1');
    const v4any = await listen('0.0.0.0');
    const v6loop = await listen('::1', true);
    const dual = await listen('::');
    // a connection's sockets listen on nothing
    const client = connect(port(v4loop), '127.0.0.1');
    clients.push(client);
    await new Promise((resolve) => client.once('connect', resolve));

    const diag = nativeAddon().tcpListeners();
    expect(diag).not.toBeNull();
    const expected = [
      { port: port(v4loop), loopback: true },
      { port: port(v4any), loopback: false },
      { port: port(v6loop), loopback: true },
      { port: port(dual), loopback: false },
    ];
    expect(ours(diag!).map(({ port: p, loopback }) => ({ port: p, loopback }))).toEqual(
      expect.arrayContaining(expected),
    );
    expect(ours(diag!)).toHaveLength(expected.length);
    expect(ours(diag!)).toEqual(ours(fromProc('self')));
    expect(ours(namespaceListening(process.pid))).toEqual(ours(diag!));
  });

  it('from /proc/PID/net for a process in another namespace: its listener, none of ours', async () => {
    // one of ours, which its namespace must not show
    await listen('127.0.0.1');
    child = spawn(
      'unshare',
      [
        '--net',
        '/usr/bin/python3',
        '-c',
        [
          'import socket, sys, time',
          's = socket.socket()',
          "s.bind(('127.0.0.1', 0))",
          's.listen()',
          'print(s.getsockname()[1], flush=True)',
          'time.sleep(600)',
        ].join('\n'),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const theirs = Number(
      await new Promise<string>((resolve) => child!.stdout!.once('data', (d: Buffer) => resolve(String(d)))),
    );
    const listening = namespaceListening(child.pid!);
    expect(listening).toEqual(fromProc(child.pid!));
    expect(listening.map((s) => s.port)).toContain(theirs);
    const ourInodes = new Set(ours(fromProc('self')).map((s) => s.inode));
    expect(listening.filter((s) => ourInodes.has(s.inode))).toEqual([]);
    expect(ourInodes.size).toBeGreaterThan(0);
  });
});
