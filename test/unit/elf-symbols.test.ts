/**
 * native/probes/elf_file.cc's named lookup (.dynsym through its .gnu.hash or .hash table, other
 * tables by comparing the wanted names' bytes) finds exactly what the walk of every symbol finds,
 * in real binaries of this machine, and reads nothing outside a corrupt file. Both run in one
 * program (test/support/elf-lookup.cc) built with the address and undefined-behaviour sanitizers.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { buildGo } from '../support/go-build';

const LIB = '/usr/lib/x86_64-linux-gnu';
const SHT_PROGBITS = 1;
const SHT_GNU_HASH = 0x6ffffff6;

let dir: string;
let lookupExe: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-elf-'));
  lookupExe = join(dir, 'elf-lookup');
  const probes = resolve(__dirname, '../../native/probes');
  execFileSync('g++', [
    ...['-std=c++17', '-Wall', '-Wextra', '-Werror', '-g'],
    ...['-fsanitize=address,undefined', '-fno-sanitize-recover=all', '-I', probes, '-o', lookupExe],
    ...[
      resolve(__dirname, '../support/elf-lookup.cc'),
      join(probes, 'elf_file.cc'),
      join(probes, 'elf_symbols.cc'),
    ],
    '-lelf',
  ]);
}, 120_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Found {
  ok: boolean;
  walk: string[];
  named: string[];
  /** ReadElfSymbols' answer, "name value offset" (offset "-": none) */
  read: string[];
}

/** Both ways' symbols ("name value size type" lines); a sanitizer's report fails the program and the test. */
function lookup(file: string, how: 'dynamic' | 'all', names: string[]): Found {
  const out = execFileSync(lookupExe, [file, how, ...names], {
    encoding: 'utf8',
    env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=0' },
    maxBuffer: 64 << 20,
  });
  const found: Found = { ok: false, walk: [], named: [], read: [] };
  for (const line of out.trim().split('\n')) {
    const [how, ...rest] = line.split('\t');
    if (how === 'ok') found.ok = rest[0] === '1';
    else found[how as 'walk' | 'named' | 'read'].push(rest.join(' '));
  }
  return found;
}

/** Every name the file defines in .dynsym (versions dropped), as nm lists them. */
function dynamicNames(file: string): string[] {
  const out = execFileSync('nm', ['-D', '--defined-only', '--format=posix', file], {
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  return [
    ...new Set(
      out
        .trim()
        .split('\n')
        .map((line) => line.split(' ')[0]!.replace(/@.*/, '')),
    ),
  ];
}

const ABSENT = ['', 'kreplay_absent', 'SSL_writ', 'SSL_write_exx', 'memcpy2', 'main.absent', 'x'];

/** name -> how many times each way found it */
function count(lines: string[], name: string): number {
  return lines.filter((line) => line.split(' ')[0] === name).length;
}

describe("an ELF file's named symbols", () => {
  const node = realpathSync(process.execPath);
  const python = realpathSync('/usr/bin/python3');
  const cases: [string, string, string[], [string, number][]][] = [
    // file, label, names, [name, times found] in .dynsym (all tables: below)
    [
      `${LIB}/libc.so.6`,
      'libc',
      ['memcpy', 'sys_errlist', 'environ', 'stdout', 'realpath'],
      [
        ['memcpy', 2],
        ['sys_errlist', 4],
        ['environ', 1],
      ],
    ],
    [
      `${LIB}/libssl.so.3`,
      'libssl',
      ['SSL_write', 'SSL_read_ex', 'SSL_write_ex', 'SSL_do_handshake'],
      [
        ['SSL_write', 1],
        ['SSL_read_ex', 1],
      ],
    ],
    [
      `${LIB}/libuv.so.1`,
      'libuv',
      ['uv_run', 'uv_default_loop', 'uv__signal_tree'],
      [
        ['uv_run', 1],
        ['uv__signal_tree', 0],
      ],
    ],
    [
      python,
      'python3',
      ['Py_AddPendingCall', 'PyRun_SimpleString', '_PyRuntime'],
      [
        ['_PyRuntime', 1],
        ['Py_AddPendingCall', 1],
      ],
    ],
    [
      node,
      'the pinned node',
      ['napi_module_register', 'uv__signal_tree', 'SSL_write', 'uv_run'],
      [
        ['napi_module_register', 1],
        ['uv__signal_tree', 0],
        ['SSL_write', 1],
      ],
    ],
  ];

  it.each(cases)(
    '%s (%s): the same symbols both ways, .dynsym alone and with .symtab',
    (file, _label, names, expected) => {
      const dynamic = lookup(file, 'dynamic', [...names, ...ABSENT]);
      expect(dynamic.ok).toBe(true);
      expect(dynamic.named).toEqual(dynamic.walk);
      for (const [name, times] of expected) expect([name, count(dynamic.named, name)]).toEqual([name, times]);
      for (const name of ABSENT.filter((n) => n !== '')) expect(count(dynamic.named, name)).toBe(0);
      const all = lookup(file, 'all', [...names, ...ABSENT]);
      expect(all.named).toEqual(all.walk);
      expect(all.named.length).toBeGreaterThanOrEqual(dynamic.named.length);
    },
  );

  it('the pinned node: uv__signal_tree, a local symbol, is found in .symtab alone', () => {
    const all = lookup(node, 'all', ['uv__signal_tree', 'napi_module_register']);
    expect(count(all.named, 'uv__signal_tree')).toBe(1);
    expect(all.named).toEqual(all.walk);
  });

  it.each([[`${LIB}/libc.so.6`], [`${LIB}/libssl.so.3`], [python]])(
    'every name %s exports, looked up at once through its .gnu.hash, as the walk finds it',
    (file) => {
      const names = dynamicNames(file);
      expect(names.length).toBeGreaterThan(500);
      const found = lookup(file, 'dynamic', names);
      expect(found.named).toEqual(found.walk);
      expect(found.named.length).toBeGreaterThanOrEqual(names.length);
    },
  );

  it('the pinned node: every 500th name of its .symtab, found both ways alike', () => {
    const out = execFileSync('nm', ['--defined-only', '--format=posix', node], {
      encoding: 'utf8',
      maxBuffer: 256 << 20,
    });
    const names = [
      ...new Set(
        out
          .trim()
          .split('\n')
          .map((line) => line.split(' ')[0]!),
      ),
    ].filter((_, i) => i % 500 === 0);
    expect(names.length).toBeGreaterThan(150);
    const found = lookup(node, 'all', names);
    expect(found.named).toEqual(found.walk);
    expect(found.named.length).toBeGreaterThanOrEqual(names.length);
  });

  it('every name libc exports, through its .hash when .gnu.hash is not there', () => {
    const copy = join(dir, 'libc-sysv.so');
    const bytes = readFileSync(`${LIB}/libc.so.6`);
    setType(bytes, section(bytes, '.gnu.hash'), SHT_PROGBITS);
    writeFileSync(copy, bytes);
    const names = dynamicNames(`${LIB}/libc.so.6`);
    const found = lookup(copy, 'dynamic', [...names, ...ABSENT]);
    expect(found.named).toEqual(found.walk);
    expect(found.named.length).toBeGreaterThanOrEqual(names.length);
  });

  it("a Go program built here (cgo, Go's own linker): the same both ways", () => {
    const exe = buildGo(
      resolve(__dirname, '../support/runtimes/append-server.go'),
      join(dir, 'append-server'),
    );
    const names = [
      'main.main',
      'runtime.newproc1',
      'runtime.goexit',
      'crypto/tls.(*Conn).Write',
      'runtime.buildVersion',
      ...ABSENT,
    ];
    const all = lookup(exe, 'all', names);
    expect(count(all.named, 'main.main')).toBe(1);
    expect(count(all.named, 'runtime.buildVersion')).toBe(1);
    expect(all.named).toEqual(all.walk);
    const dynamic = lookup(exe, 'dynamic', [...dynamicNames(exe), ...names]);
    expect(dynamic.named).toEqual(dynamic.walk);
  }, 180_000);

  it('a name defined twice: its value and its file offset are read from one definition', () => {
    // two static variables of one name in two files: the first linked in .bss (no bytes in the
    // file), the second in .data (bytes in the file), both in .symtab in that order
    writeFileSync(join(dir, 'twin-bss.c'), 'static int twin __attribute__((used));\n');
    writeFileSync(
      join(dir, 'twin-data.c'),
      'static int twin __attribute__((used)) = 7;\nint main(void) { return 0; }\n',
    );
    const exe = join(dir, 'twins');
    execFileSync('gcc', ['-o', exe, join(dir, 'twin-bss.c'), join(dir, 'twin-data.c')]);
    const found = lookup(exe, 'all', ['twin']);
    expect(count(found.walk, 'twin')).toBe(2);
    const [first] = found.walk.filter((line) => line.startsWith('twin '));
    // the .bss one's value, and no offset: the .data one's offset would point at another variable
    expect(found.read).toEqual([`twin ${first!.split(' ')[1]} -`]);
  });
});

interface Section {
  header: number;
  offset: number;
  size: number;
}

/** A 64-bit ELF file's section by name, from its section headers. */
function section(bytes: Buffer, name: string): Section {
  const table = Number(bytes.readBigUInt64LE(0x28));
  const entry = bytes.readUInt16LE(0x3a);
  const header = (i: number) => table + i * entry;
  const names = Number(bytes.readBigUInt64LE(header(bytes.readUInt16LE(0x3e)) + 0x18));
  for (let i = 0; i < bytes.readUInt16LE(0x3c); i++) {
    const at = names + bytes.readUInt32LE(header(i));
    if (bytes.toString('latin1', at, bytes.indexOf(0, at)) === name)
      return {
        header: header(i),
        offset: Number(bytes.readBigUInt64LE(header(i) + 0x18)),
        size: Number(bytes.readBigUInt64LE(header(i) + 0x20)),
      };
  }
  throw new Error(`no ${name}`);
}

function setType(bytes: Buffer, s: Section, type: number): void {
  bytes.writeUInt32LE(type, s.header + 4);
}

describe('a corrupt ELF file', () => {
  // libssl: .gnu.hash alone; every exported name looked up
  const ssl = `${LIB}/libssl.so.3`;

  /** A copy of `file` changed in place by `corrupt` (or the part of it `corrupt` returns), and what both ways find in it. */
  function corrupted(file: string, corrupt: (bytes: Buffer) => unknown, names = dynamicNames(ssl)): Found {
    const bytes = readFileSync(file);
    const copy = join(dir, 'corrupt.so');
    const part = corrupt(bytes);
    writeFileSync(copy, Buffer.isBuffer(part) ? part : bytes);
    return lookup(copy, 'dynamic', [...names, ...ABSENT]);
  }

  const gnu = (bytes: Buffer) => section(bytes, '.gnu.hash');
  const header = (bytes: Buffer) => {
    const at = gnu(bytes).offset;
    return { at, buckets: bytes.readUInt32LE(at), blooms: bytes.readUInt32LE(at + 8) };
  };

  it.each<[string, (bytes: Buffer) => unknown]>([
    ['no buckets', (b) => b.writeUInt32LE(0, header(b).at)],
    ['no Bloom words', (b) => b.writeUInt32LE(0, header(b).at + 8)],
    ['a Bloom filter larger than the file', (b) => b.writeUInt32LE(0xffffffff, header(b).at + 8)],
    ['its first hashed symbol past the table', (b) => b.writeUInt32LE(0xffffffff, header(b).at + 4)],
    ['a Bloom shift past 31', (b) => b.writeUInt32LE(77, header(b).at + 12)],
    [
      'buckets pointing past the symbols',
      (b) => {
        const { at, buckets, blooms } = header(b);
        for (let i = 0; i < buckets; i++) b.writeUInt32LE(0xfffffff0, at + 16 + blooms * 8 + i * 4);
      },
    ],
    [
      'buckets pointing under the first hashed symbol',
      (b) => {
        const { at, buckets, blooms } = header(b);
        for (let i = 0; i < buckets; i++) b.writeUInt32LE(1, at + 16 + blooms * 8 + i * 4);
      },
    ],
    [
      'chains without an end',
      (b) => {
        const { at, buckets, blooms } = header(b);
        const s = gnu(b);
        for (let p = at + 16 + blooms * 8 + buckets * 4; p + 4 <= s.offset + s.size; p += 4)
          b.writeUInt32LE(0, p);
      },
    ],
    ['a hash table cut short', (b) => b.writeBigUInt64LE(24n, gnu(b).header + 0x20)],
  ])(".gnu.hash with %s: the walk's answer, nothing read outside", (_what, corrupt) => {
    const found = corrupted(ssl, corrupt);
    expect(found.ok).toBe(true);
    expect(count(found.walk, 'SSL_write')).toBe(1);
    expect(found.named).toEqual(found.walk);
  });

  it(".gnu.hash cut halfway through its chains: the walk's answer for the names past the cut", () => {
    const found = corrupted(ssl, (b) => {
      const s = gnu(b);
      const { buckets, blooms } = header(b);
      const chainAt = 16 + blooms * 8 + buckets * 4;
      b.writeBigUInt64LE(BigInt(chainAt + Math.floor((s.size - chainAt) / 8) * 4), s.header + 0x20);
    });
    expect(count(found.walk, 'SSL_write')).toBe(1);
    expect(found.named).toEqual(found.walk);
  });

  it('a Bloom filter that says no to every name: not found, as the dynamic linker would say', () => {
    const found = corrupted(ssl, (b) => {
      const { at, blooms } = header(b);
      b.fill(0, at + 16, at + 16 + blooms * 8);
    });
    expect(count(found.walk, 'SSL_write')).toBe(1);
    expect(count(found.named, 'SSL_write')).toBe(0);
    // what it does find is the walk's, in order: a subset, never a symbol the walk has not
    expect(found.walk.filter((line) => found.named.includes(line))).toEqual(found.named);
  });

  it.each<[string, (bytes: Buffer) => unknown]>([
    ['no buckets', (b) => b.writeUInt32LE(0, section(b, '.hash').offset)],
    [
      'fewer chains than symbols',
      (b) =>
        b.writeUInt32LE(b.readUInt32LE(section(b, '.hash').offset + 4) - 1, section(b, '.hash').offset + 4),
    ],
    [
      'chains that loop',
      (b) => {
        const s = section(b, '.hash');
        const buckets = b.readUInt32LE(s.offset);
        const chains = b.readUInt32LE(s.offset + 4);
        for (let i = 0; i < chains; i++) b.writeUInt32LE(i, s.offset + 8 + buckets * 4 + i * 4);
      },
    ],
    [
      'buckets pointing past the symbols',
      (b) => {
        const s = section(b, '.hash');
        for (let i = 0; i < b.readUInt32LE(s.offset); i++) b.writeUInt32LE(0xfffffff0, s.offset + 8 + i * 4);
      },
    ],
  ])(
    ".hash (libc, its .gnu.hash hidden) with %s: the walk's answer, nothing read outside",
    (_what, corrupt) => {
      const names = ['memcpy', 'sys_errlist', 'environ', 'realpath', 'stdout'];
      const found = corrupted(
        `${LIB}/libc.so.6`,
        (b) => {
          setType(b, gnu(b), SHT_PROGBITS);
          corrupt(b);
        },
        names,
      );
      expect(count(found.walk, 'sys_errlist')).toBe(4);
      expect(found.named).toEqual(found.walk);
    },
  );

  it.each<[string, (bytes: Buffer) => unknown]>([
    [
      '.dynsym past the end of the file',
      (b) => b.writeBigUInt64LE(BigInt(b.length), section(b, '.dynsym').header + 0x18),
    ],
    [
      '.dynstr longer than the file',
      (b) => b.writeBigUInt64LE(BigInt(b.length), section(b, '.dynstr').header + 0x20),
    ],
    [
      'names past the end of .dynstr',
      (b) => {
        const s = section(b, '.dynstr');
        b.writeBigUInt64LE(8n, s.header + 0x20);
      },
    ],
    ['cut to its first 8 KiB', (b) => b.subarray(0, 8192)],
    ['cut before its section headers', (b) => b.subarray(0, Number(b.readBigUInt64LE(0x28)) + 100)],
  ])('%s: nothing found either way, no crash', (_what, corrupt) => {
    const found = corrupted(ssl, corrupt);
    expect(count(found.walk, 'SSL_write')).toBe(0);
    expect(found.named).toEqual(found.walk);
  });

  it('not ELF at all: not ok, nothing found', () => {
    const found = corrupted(ssl, () => Buffer.from('#!/bin/sh\necho hello\n'));
    expect(found).toEqual({ ok: false, walk: [], named: [], read: [] });
  });

  it('keeps the gnu hash type the test relies on', () => {
    expect(readFileSync(ssl).readUInt32LE(gnu(readFileSync(ssl)).header + 4)).toBe(SHT_GNU_HASH);
  });
});
