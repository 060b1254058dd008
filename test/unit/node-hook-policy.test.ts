/** What the Node hook decides from /proc alone, before anything is sent to a process. */
import { hookRefusal, inspectorPort, isKreplay, nodeOptions } from '../../agent/runtimes/node/hook-policy';
import {
  parseEnviron,
  parseSeccomp,
  parseStatus,
  seccompFiltered,
  type ProcessFacts,
} from '../../agent/runtimes/node/node-process';
import { hookExpression } from '../../agent/runtimes/node/hook-signal';
import { parseListening } from '../../agent/runtimes/node/listening-sockets';
import { findSignalListener, type MemoryReader } from '../../agent/runtimes/node/signal-listener';
import { selectionWants } from '../../agent/filter/task-filter';

const facts = (over: Partial<ProcessFacts> = {}): ProcessFacts => ({
  pid: 100,
  innerPid: 100,
  comm: 'node',
  argv: ['node', 'server.js'],
  env: {},
  sigusr1Caught: true,
  ...over,
});

describe('Node hook policy', () => {
  it('lets an ordinary Node server through', () => {
    expect(hookRefusal(facts())).toBeNull();
  });

  it('refuses a process that opted out, in any spelling', () => {
    for (const value of ['off', 'OFF', '0', 'false', 'no'])
      expect(hookRefusal(facts({ env: { KREPLAY_NODE_HOOK: value } }))).toEqual({
        reason: `opted out (KREPLAY_NODE_HOOK=${value})`,
        transient: false,
      });
    expect(hookRefusal(facts({ env: { KREPLAY_NODE_HOOK: 'on' } }))).toBeNull();
  });

  it("refuses kreplay's own processes (agent, daemon, CLI)", () => {
    expect(isKreplay(['/opt/kreplay/node', '/opt/kreplay/bin/kreplay.js', 'agent'])).toBe(true);
    expect(isKreplay(['node', 'dist/cli/main.js'])).toBe(true);
    expect(isKreplay(['node', 'server.js', 'kreplay.js'])).toBe(false);
    expect(hookRefusal(facts({ argv: ['node', '/usr/lib/kreplay/bin/kreplay.js', 'daemon'] }))?.reason).toBe(
      "kreplay's own process",
    );
  });

  it("takes Node's options before the script and from NODE_OPTIONS, not the script's arguments", () => {
    expect(nodeOptions(['node', '-r', 'x', '--max-old-space-size=64', 'app.js', '--inspect'])).toEqual([
      '-r',
      'x',
      '--max-old-space-size=64',
    ]);
    expect(nodeOptions(['node', '-e', 'code', '--inspect'], '--trace-warnings')).toEqual([
      '-e',
      '--trace-warnings',
    ]);
    expect(hookRefusal(facts({ argv: ['node', 'app.js', '--inspect'] }))).toBeNull();
  });

  it("refuses a process whose inspector is its user's, or would open beyond loopback", () => {
    const reason = (argv: string[], NODE_OPTIONS?: string) =>
      hookRefusal(facts({ argv: ['node', ...argv, 'app.js'], env: { NODE_OPTIONS } }))?.reason ?? null;
    expect(reason(['--inspect'])).toMatch(/open already \(--inspect\)/);
    expect(reason(['--inspect-brk=0.0.0.0:9229'])).toMatch(/open already \(--inspect-brk\)/);
    expect(reason([], '--inspect-wait')).toMatch(/open already/);
    expect(reason(['--inspect-port=0.0.0.0:9229'])).toBe(
      'SIGUSR1 would open its inspector on 0.0.0.0, beyond loopback (--inspect-port)',
    );
    expect(reason(['--inspect-port', '10.0.0.5:9230'])).toMatch(/on 10\.0\.0\.5, beyond loopback/);
    expect(reason(['--inspect-port=9230'])).toBeNull();
    expect(reason(['--inspect-port=localhost:9230'])).toBeNull();
    expect(reason(['--disable-sigusr1'])).toBe('SIGUSR1 is disabled (--disable-sigusr1)');
  });

  it('knows the port SIGUSR1 opens the inspector on before it is sent (the guard holds it), and refuses a random one', () => {
    expect(inspectorPort([])).toBe(9229);
    expect(inspectorPort(['--inspect-port=9230'])).toBe(9230);
    expect(inspectorPort(['--inspect-port', '127.0.0.1:9231'])).toBe(9231);
    expect(inspectorPort(['--debug-port=[::1]:9232'])).toBe(9232);
    // the command line's wins over NODE_OPTIONS' (which nodeOptions puts after it)
    expect(inspectorPort(nodeOptions(['node', '--inspect-port=9233', 'app.js'], '--inspect-port=9234'))).toBe(
      9233,
    );
    expect(inspectorPort(['--inspect-port=0'])).toBe(0);
    expect(inspectorPort(['--inspect-port=70000'])).toBeNaN();
    const reason = (argv: string[]) =>
      hookRefusal(facts({ argv: ['node', ...argv, 'app.js'] }))?.reason ?? null;
    expect(reason(['--inspect-port=0'])).toMatch(/a port the agent cannot guard beforehand/);
    expect(reason(['--inspect-port=localhost:x'])).toMatch(/a port the agent cannot guard beforehand/);
    expect(reason(['--inspect-port=9230'])).toBeNull();
  });

  it('refuses a process SIGUSR1 would end (for now: it may catch it soon)', () => {
    expect(hookRefusal(facts({ sigusr1Caught: false }))).toEqual({
      reason: 'SIGUSR1 is not caught: it would end the process',
      transient: true,
    });
  });
});

describe('what /proc says', () => {
  it('reads the inner pid and whether SIGUSR1 is caught from status', () => {
    const status = 'Name:\tnode\nNSpid:\t4242\t17\nSigBlk:\t0000000000000000\nSigCgt:\t0000000100004602\n';
    expect(parseStatus(status)).toEqual({ innerPid: 17, caught: true });
    expect(parseStatus(status.replace('0000000100004602', '0000000100004002'))).toEqual({
      innerPid: 17,
      caught: false,
    });
  });

  it('tells a process under a seccomp filter, which the hook signals with writes only', () => {
    const status = 'Name:\tnode\nNoNewPrivs:\t0\nSeccomp:\t0\nSeccomp_filters:\t0\n';
    expect(parseSeccomp(status)).toBe(false);
    expect(parseSeccomp(status.replace('Seccomp:\t0', 'Seccomp:\t2'))).toBe(true);
    expect(parseSeccomp(status.replace('Seccomp:\t0', 'Seccomp:\t1'))).toBe(true);
    // a kernel without seccomp: no field, no filter
    expect(parseSeccomp('Name:\tnode\n')).toBe(false);
    // a process gone: never the getpriority signal
    expect(seccompFiltered(2 ** 22 + 1)).toBe(true);
    expect(hookExpression({ mailbox: false })).toMatch(/\)\(\{.*\}, \{"mailbox":false\}\)$/s);
  });

  it('reads only the variables the hook cares about from environ', () => {
    expect(
      parseEnviron('PATH=/bin\0KREPLAY_NODE_HOOK=off\0NODE_OPTIONS=--a=b c\0X=KREPLAY_NODE_HOOK=on\0'),
    ).toEqual({
      KREPLAY_NODE_HOOK: 'off',
      NODE_OPTIONS: '--a=b c',
    });
  });

  it('lists listening sockets and whether they are on loopback', () => {
    const tcp = [
      '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
      '   0: 0100007F:2405 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0 100 0 0 10 0',
      '   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0 100 0 0 10 0',
      '   2: 0100007F:2405 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 333 1 0 100 0 0 10 0',
    ].join('\n');
    expect(parseListening(tcp)).toEqual([
      { inode: 111, port: 9221, loopback: true },
      { inode: 222, port: 8080, loopback: false },
    ]);
    const tcp6 = [
      '  sl  local_address                         remote_address                        st',
      '   0: 00000000000000000000000001000000:2405 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 444 1',
    ].join('\n');
    expect(parseListening(tcp6)).toEqual([{ inode: 444, port: 9221, loopback: true }]);
  });
});

describe("libuv's signal tree", () => {
  // nodes at 0x1000 (SIGINT, left child 0x2000) and 0x2000 (signum given); the tree's root at 0x100
  const memory = (signum: number, extra: Record<number, Buffer> = {}): MemoryReader => {
    const words = new Map<bigint, Buffer>();
    const u64 = (v: bigint) => {
      const b = Buffer.alloc(8);
      b.writeBigUInt64LE(v);
      return b;
    };
    const i32 = (v: number) => {
      const b = Buffer.alloc(4);
      b.writeInt32LE(v);
      return b;
    };
    words.set(0x100n, u64(0x1000n));
    words.set(0x1000n + 0x68n, i32(2));
    words.set(0x1000n + 0x70n, u64(0x2000n));
    words.set(0x1000n + 0x78n, u64(0n));
    words.set(0x2000n + 0x68n, i32(signum));
    words.set(0x2000n + 0x70n, u64(0n));
    words.set(0x2000n + 0x78n, u64(0n));
    for (const [at, value] of Object.entries(extra)) words.set(BigInt(at), value);
    return (address) => {
      const found = words.get(address);
      if (!found) throw new Error(`unmapped ${address}`);
      return found;
    };
  };

  it("finds a SIGUSR1 handle, or answers none, or 'unknown' when the memory is not a tree", () => {
    expect(findSignalListener(memory(10), 0x100n, 10)).toBe('listener');
    expect(findSignalListener(memory(15), 0x100n, 10)).toBe('none');
    expect(findSignalListener(memory(999), 0x100n, 10)).toBe('unknown');
    expect(findSignalListener(memory(15), 0x200n, 10)).toBe('unknown');
  });
});

describe('the kernel filter in user space', () => {
  const task = { pid: 7, comm: 'node', cgroupId: 42n };
  it('wants every task without includes, unless excluded; with includes, one must name it', () => {
    expect(selectionWants({ exclude: [] }, task)).toBe(true);
    expect(selectionWants({ exclude: [{ comm: 'node' }] }, task)).toBe(false);
    expect(selectionWants({ include: [], exclude: [] }, task)).toBe(false);
    expect(selectionWants({ include: [{ cgroupId: 42n }], exclude: [] }, task)).toBe(true);
    expect(selectionWants({ include: [{ pid: 8 }, { comm: 'node' }], exclude: [] }, task)).toBe(true);
    expect(selectionWants({ include: [{ pid: 7 }], exclude: [{ cgroupId: 42n }] }, task)).toBe(false);
    expect(selectionWants({ include: [{ cgroupId: 42n }], exclude: [] }, { ...task, cgroupId: null })).toBe(
      false,
    );
  });
});
