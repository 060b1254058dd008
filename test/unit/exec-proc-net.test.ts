/**
 * How `replay --exec` names a build's socket when pidfd_getfd is denied and the build is in another
 * network namespace (native/exec/exec_proc_net.cc): which /proc/PID/net tables it reads for a socket,
 * by the protocol name sockfs gives it, and what it reads there. Driven through the addon on the
 * tables and names of real sockets a python3 child opens, as the supervisor reads a build's.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nativeAddon } from '../../core/native/addon';

const { execProcSocket, execSocketTables } = nativeAddon();

/** Sockets of every kind the supervisor names, opened by one process: their inodes, sockfs names, and its tables. */
interface Sockets {
  port: number;
  port6: number;
  path: string;
  inodes: Record<string, number>;
  names: Record<string, string>;
  tables: Record<'tcp' | 'tcp6' | 'udp' | 'unix', string>;
}

const SOCKETS = `
import json, os, socket, sys
path = sys.argv[1]
s = {}
s['tcpListener'] = socket.socket(); s['tcpListener'].bind(('127.0.0.1', 0)); s['tcpListener'].listen()
port = s['tcpListener'].getsockname()[1]
s['tcpClient'] = socket.create_connection(('127.0.0.1', port)); s['tcpAccepted'] = s['tcpListener'].accept()[0]
s['tcp6Listener'] = socket.socket(socket.AF_INET6); s['tcp6Listener'].bind(('::1', 0)); s['tcp6Listener'].listen()
port6 = s['tcp6Listener'].getsockname()[1]
s['tcp6Client'] = socket.create_connection(('::1', port6)); s['tcp6Accepted'] = s['tcp6Listener'].accept()[0]
s['udp'] = socket.socket(type=socket.SOCK_DGRAM); s['udp'].connect(('127.0.0.1', 53))
s['udp6'] = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s['unixListener'] = socket.socket(socket.AF_UNIX); s['unixListener'].bind(path); s['unixListener'].listen()
s['unixClient'] = socket.socket(socket.AF_UNIX); s['unixClient'].connect(path); s['unixAccepted'] = s['unixListener'].accept()[0]
s['unixDgram'] = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s['netlink'] = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
print(json.dumps({
  'port': port, 'port6': port6, 'path': path,
  'inodes': {k: os.fstat(v.fileno()).st_ino for k, v in s.items()},
  'names': {k: os.getxattr('/proc/self/fd/%d' % v.fileno(), 'system.sockprotoname').rstrip(b'\\0').decode() for k, v in s.items()},
  'tables': {t: open('/proc/self/net/' + t).read() for t in ('tcp', 'tcp6', 'udp', 'unix')},
}))
`;

let dir = '';
let sockets: Sockets;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-proc-net-'));
  sockets = JSON.parse(
    execFileSync('python3', ['-c', SOCKETS, join(dir, 'app.sock')], { encoding: 'utf8', maxBuffer: 1 << 30 }),
  ) as Sockets;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The name and connectedness the supervisor reads for socket `which` from table `table`'s text. */
const fromTable = (table: keyof Sockets['tables'], which: string) =>
  execProcSocket(table, sockets.tables[table], sockets.inodes[which]!);

describe('the tables a socket is looked for in, by the name sockfs gives its protocol', () => {
  it("reads only the socket's own table, and none for a protocol no table kreplay reads lists", () => {
    const tables = (which: string) => execSocketTables(sockets.names[which]!);
    expect(tables('tcpClient')).toEqual(['tcp']);
    expect(tables('tcp6Accepted')).toEqual(['tcp6']);
    expect(tables('udp')).toEqual(['udp']);
    expect(tables('udp6')).toEqual(['udp6']);
    // a stream one is UNIX-STREAM (Linux 5.15+), a datagram one UNIX
    expect(tables('unixAccepted')).toEqual(['unix']);
    expect(tables('unixDgram')).toEqual(['unix']);
    // `ip link set lo up`'s sends: never looked for, in no table
    expect(tables('netlink')).toEqual([]);
  });

  it('reads every table when the name cannot be read', () => {
    expect(execSocketTables('')).toEqual(['unix', 'tcp', 'tcp6', 'udp', 'udp6']);
  });
});

describe("a socket read from another network namespace's /proc tables", () => {
  it('names a TCP connection by its peer, and an accepted one by the address its listener took it on (listed before it)', () => {
    const { port, port6 } = sockets;
    expect(fromTable('tcp', 'tcpClient')).toEqual({ name: `tcp 127.0.0.1:${port}`, connected: true });
    expect(fromTable('tcp', 'tcpAccepted')).toEqual({
      name: `tcp accepted 127.0.0.1:${port}`,
      connected: true,
    });
    expect(fromTable('tcp6', 'tcp6Client')).toEqual({ name: `tcp [::1]:${port6}`, connected: true });
    expect(fromTable('tcp6', 'tcp6Accepted')).toEqual({
      name: `tcp accepted [::1]:${port6}`,
      connected: true,
    });
    // a listener is connected to nothing: named again at its next call
    expect(fromTable('tcp', 'tcpListener')).toEqual({ name: 'tcp', connected: false });
    expect(fromTable('udp', 'udp')).toEqual({ name: 'udp 127.0.0.1:53', connected: true });
  });

  it('says a unix socket is connected when its state is (an accepted one, named by its own address): it is looked up once', () => {
    expect(fromTable('unix', 'unixAccepted')).toEqual({ name: `unix ${sockets.path}`, connected: true });
    // the table names no peer: an unbound client is only `unix`
    expect(fromTable('unix', 'unixClient')).toEqual({ name: 'unix', connected: true });
    expect(fromTable('unix', 'unixListener')).toEqual({ name: `unix ${sockets.path}`, connected: false });
    expect(fromTable('unix', 'unixDgram')).toEqual({ name: 'unix', connected: false });
  });

  it('finds nothing for a socket the table does not list', () => {
    expect(fromTable('tcp', 'unixAccepted')).toBeNull();
    expect(fromTable('unix', 'tcpClient')).toBeNull();
  });
});
