/** The text of a write target as the API shows it, from the fields of a kr_target record. */
import { TargetFlag, targetKindCode, targetText, type TargetRecordFields } from '../../core/model';

const AF_UNIX = 1;
const AF_INET = 2;
const AF_INET6 = 10;

function record(fields: Partial<TargetRecordFields>): TargetRecordFields {
  return {
    kind: targetKindCode('file'),
    flags: 0,
    family: 0,
    protocol: 0,
    port: 0,
    addr: new Uint8Array(16),
    data: Buffer.alloc(0),
    ...fields,
  };
}

function inet(family: number, protocol: number, address: number[], port: number): TargetRecordFields {
  const addr = new Uint8Array(16);
  addr.set(address);
  return record({ kind: targetKindCode('socket'), family, protocol, addr, port });
}

const v6 = (...groups: number[]) => groups.flatMap((g) => [g >> 8, g & 0xff]);
const names = (...leafFirst: string[]) => Buffer.from(leafFirst.map((n) => `${n}\0`).join(''));

describe('targetText', () => {
  it.each<[string, TargetRecordFields, string]>([
    ['a file', record({ data: names('wal.log', 'app', 'lib', 'var') }), '/var/lib/app/wal.log'],
    ['a device', record({ kind: targetKindCode('char'), data: names('null', 'dev') }), '/dev/null'],
    ['the root', record({ data: Buffer.alloc(0) }), '/'],
    ['an unlinked file', record({ data: names('x', 'tmp'), flags: TargetFlag.Deleted }), '/tmp/x (deleted)'],
    ['a cut path', record({ data: names('c', 'b'), flags: TargetFlag.Truncated }), '.../b/c'],
    ['a name that is not UTF-8', record({ data: Buffer.from([0x61, 0xff, 0]) }), '/a\ufffd'],
    ['a pipe', record({ kind: targetKindCode('pipe'), flags: TargetFlag.AnonPipe }), 'pipe'],
    ['a named FIFO', record({ kind: targetKindCode('pipe'), data: names('fifo', 'run') }), '/run/fifo'],
    [
      'an eventfd',
      record({ kind: targetKindCode('anon'), data: names('[eventfd]') }),
      'anon_inode:[eventfd]',
    ],
    ['tcp over IPv4', inet(AF_INET, 6, [10, 0, 0, 5], 5432), 'tcp 10.0.0.5:5432'],
    ['udp', inet(AF_INET, 17, [127, 0, 0, 1], 53), 'udp 127.0.0.1:53'],
    ['IPv6 loopback', inet(AF_INET6, 6, v6(0, 0, 0, 0, 0, 0, 0, 1), 8080), 'tcp [::1]:8080'],
    [
      'IPv6, longest zero run',
      inet(AF_INET6, 6, v6(0x2001, 0xdb8, 0, 0, 1, 0, 0, 0), 1),
      'tcp [2001:db8:0:0:1::]:1',
    ],
    ['IPv6, no zero run', inet(AF_INET6, 17, v6(1, 2, 3, 4, 5, 6, 7, 8), 9), 'udp [1:2:3:4:5:6:7:8]:9'],
    ['IPv6, one zero group', inet(AF_INET6, 6, v6(1, 0, 3, 4, 5, 6, 7, 8), 9), 'tcp [1:0:3:4:5:6:7:8]:9'],
    [
      'IPv4-mapped IPv6',
      inet(AF_INET6, 6, [...v6(0, 0, 0, 0, 0, 0xffff), 10, 1, 2, 3], 443),
      'tcp 10.1.2.3:443',
    ],
    [
      'a connection a listener accepted, by its listening address',
      { ...inet(AF_INET, 6, [127, 0, 0, 1], 8080), flags: TargetFlag.Accepted },
      'tcp accepted 127.0.0.1:8080',
    ],
    [
      'an accepted IPv6 connection',
      { ...inet(AF_INET6, 6, v6(0, 0, 0, 0, 0, 0, 0, 1), 8443), flags: TargetFlag.Accepted },
      'tcp accepted [::1]:8443',
    ],
    ['an unnamed IP protocol', inet(AF_INET, 99, [1, 2, 3, 4], 0), 'ip99 1.2.3.4:0'],
    ['an unconnected socket', inet(AF_INET6, 17, [], 0), 'udp'],
    [
      'a unix path',
      record({ kind: targetKindCode('socket'), family: AF_UNIX, data: Buffer.from('/run/app.sock\0') }),
      'unix /run/app.sock',
    ],
    [
      'an abstract unix name',
      record({ kind: targetKindCode('socket'), family: AF_UNIX, data: Buffer.from('\0app\0x') }),
      'unix @app@x',
    ],
    ['an unnamed unix socket', record({ kind: targetKindCode('socket'), family: AF_UNIX }), 'unix'],
    ['netlink', record({ kind: targetKindCode('socket'), family: 16 }), 'netlink'],
    ['another family', record({ kind: targetKindCode('socket'), family: 38 }), 'af38'],
  ])('%s', (_what, fields, text) => {
    expect(targetText(fields)).toBe(text);
  });
});
