/**
 * Which runtime a process runs (agent/runtimes/discovery/classify.ts, agent/runtimes/go/go-binary.ts):
 * plain functions over what /proc shows, and the classifier over real processes.
 */
import { spawn } from 'node:child_process';
import { classifyMapped, RuntimeClassifier } from '../../agent/runtimes/discovery/classify';
import { elfSectionNames, isGoFile, isGoProgram } from '../../agent/runtimes/go/go-binary';
import { exeIdentity } from '../../agent/runtimes/process-tree';
import { nativeAddon } from '../../core/native/addon';

/** A /proc/PID/maps line mapping `path`. */
const mapLine = (path: string) => `7f0000000000-7f0000001000 r-xp 00000000 08:01 42   ${path}\n`;

/** An ELF64 LE file whose section header table names `sections` (and the names table itself). */
function elfWith(sections: string[]): Buffer {
  const names = Buffer.from(['', ...sections, '.shstrtab'].join('\0') + '\0', 'latin1');
  const count = sections.length + 2;
  const shoff = 64 + names.length;
  const file = Buffer.alloc(shoff + count * 64);
  file.writeUInt32BE(0x7f454c46, 0);
  file[4] = 2;
  file[5] = 1;
  file.writeBigUInt64LE(BigInt(shoff), 0x28);
  file.writeUInt16LE(64, 0x3a);
  file.writeUInt16LE(count, 0x3c);
  file.writeUInt16LE(count - 1, 0x3e);
  names.copy(file, 64);
  let at = 1;
  for (let i = 1; i < count; i++) {
    file.writeUInt32LE(at, shoff + i * 64);
    at = names.indexOf(0, at) + 1;
  }
  const strtab = shoff + (count - 1) * 64;
  file.writeBigUInt64LE(64n, strtab + 0x18);
  file.writeBigUInt64LE(BigInt(names.length), strtab + 0x20);
  return file;
}

const reader = (file: Buffer) => (offset: number, bytes: number) => file.subarray(offset, offset + bytes);

describe('runtime classification', () => {
  it('tells CPython by its name or the libpython it maps, whatever the program is called', () => {
    expect(classifyMapped('/usr/bin/python3.11', '')).toEqual({
      runtime: 'python',
      version: { major: 3, minor: 11 },
    });
    // uwsgi embeds the interpreter through its python plugin
    expect(
      classifyMapped('/usr/bin/uwsgi-core', mapLine('/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0')),
    ).toEqual({ runtime: 'python', version: { major: 3, minor: 11 } });
    expect(classifyMapped('/opt/py/bin/python', mapLine('/opt/py/lib/libpython3.13.so.1.0'))).toEqual({
      runtime: 'python',
      version: { major: 3, minor: 13 },
    });
    // a python script's name is no interpreter; a python without a version and no libpython is none
    expect(classifyMapped('/usr/local/bin/python-build', '')).toBeNull();
    expect(classifyMapped('/opt/py/bin/python', '')).toBeNull();
  });

  it('tells the JVM by its libjvm.so, and nothing else by a name that only looks alike', () => {
    expect(
      classifyMapped(
        '/usr/lib/jvm/java-17-openjdk-amd64/bin/java',
        mapLine('/usr/lib/jvm/java-17/lib/server/libjvm.so'),
      ),
    ).toEqual({ runtime: 'jvm' });
    expect(classifyMapped('/usr/bin/tool', mapLine('/opt/libjvm.so.bak'))).toBeNull();
  });

  it("tells a Go program by Go's sections, and refuses what is no ELF64 file or is damaged", () => {
    expect(isGoProgram(elfSectionNames(reader(elfWith(['.text', '.note.go.buildid']))))).toBe(true);
    expect(isGoProgram(elfSectionNames(reader(elfWith(['.text', '.go.buildinfo']))))).toBe(true);
    expect(elfSectionNames(reader(elfWith(['.text', '.data'])))).toEqual(['', '.text', '.data', '.shstrtab']);
    expect(isGoProgram(elfSectionNames(reader(elfWith(['.text', '.data']))))).toBe(false);
    expect(elfSectionNames(reader(Buffer.from('#!/bin/sh\necho go\n')))).toBeNull();
    const damaged = elfWith(['.go.buildinfo']);
    damaged.writeUInt16LE(60000, 0x3c);
    expect(elfSectionNames(reader(damaged))).toBeNull();
    expect(isGoFile(process.execPath)).toBe(false);
    expect(isGoFile('/nonexistent/go')).toBe(false);
  });

  it('classifies real processes: this Node, a python3, and a sleep as none', async () => {
    const classifier = new RuntimeClassifier(nativeAddon());
    const classify = (pid: number) => classifier.classify(pid, exeIdentity(pid)!)?.runtime ?? null;
    expect(classify(process.pid)).toBe('node');
    const py = spawn('/usr/bin/python3', ['-c', 'import time\nprint("up", flush=True)\ntime.sleep(30)'], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const sleeper = spawn('/bin/sleep', ['30']);
    try {
      await new Promise((resolve) => py.stdout!.once('data', resolve));
      expect(classify(py.pid!)).toBe('python');
      expect(classify(sleeper.pid!)).toBeNull();
    } finally {
      py.kill('SIGKILL');
      sleeper.kill('SIGKILL');
    }
  });
});
