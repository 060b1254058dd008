/**
 * Where the agent's Go uprobes sit in a real net/http server's binary (issue 46). A uprobe on an
 * instruction the kernel cannot emulate is single-stepped out of line: a #DB trap per hit, which a
 * virtual machine turns into an exit to its hypervisor, tens of µs a hit. The entry probes of the
 * functions a request may run (runtime.chansend) sit on their stack check's JBE, which the kernel
 * emulates, not on the CMP or LEA at their entry; a receive is looked at in the blocking receives
 * (runtime.chanrecv1, chanrecv2), at their CALL runtime.chanrecv and their RETs, which no select or
 * non-blocking receive runs (net/http's context.WithCancel makes one a request), not at chanrecv's
 * own entry and RETs; a new goroutine (net/http's background read, one a request) is seen at
 * newproc1's CALL casgstatus(newg, _Gdead, _Grunnable) alone (the creator read from the runtime,
 * go-probe-runs.test.ts), not at newproc1's entry nor its RET. Read from the kernel's own list of
 * the agent's probes (bpftool perf), the binary's bytes at each probe's offset and Go's own
 * disassembly of it. A copy whose casgstatus call is set up otherwise is probed at its RET, and
 * the agent says so.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, openSync, readSync, closeSync, rmSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { buildGo } from '../support/go-build';
import { listUprobes, programsById } from '../support/uprobes';
import { waitFor } from '../support/wait';

const SERVER = join(__dirname, '..', 'support', 'runtimes', 'append-server.go');
const ENTRY_PROBES = ['go_chansend'];

let dir: string;
let server: ChildProcess;
let agent: AgentProcess;
let binary: string;
let odd: string;
let oddServer: ChildProcess;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-go-sites-'));
  binary = buildGo(SERVER, join(dir, 'append-server'));
  odd = withRunnableByStack(binary, join(dir, 'append-server-odd'));
  server = spawn(binary, [join(dir, 'lines')], { stdio: ['ignore', 'pipe', 'ignore'] });
  oddServer = spawn(odd, [join(dir, 'odd-lines')], { stdio: ['ignore', 'pipe', 'ignore'] });
  await Promise.all(
    [server, oddServer].map((s) => new Promise((resolve) => s.stdout!.once('data', resolve))),
  );
  agent = await startAgent([
    ...['--data-dir', join(dir, 'data'), '--node', 'sites'],
    ...['--pid', String(server.pid), '--pid', String(oddServer.pid)],
  ]);
  await waitFor(
    () =>
      agent.output().includes(`goroutines of ${binary} (`) &&
      agent.output().includes(`goroutines of ${odd} (`),
    90_000,
  );
}, 180_000);

afterAll(async () => {
  server?.kill('SIGKILL');
  oddServer?.kill('SIGKILL');
  await agent?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The agent's uprobes by program name: the file and offset of each. */
function agentUprobes(): Map<string, { filename: string; offset: number }[]> {
  const names = programsById();
  const byName = new Map<string, { filename: string; offset: number }[]>();
  for (const p of listUprobes()) {
    if (p.pid !== agent.child.pid || p.retprobe) continue;
    const name = names.get(p.progId)?.name ?? '';
    byName.set(name, [...(byName.get(name) ?? []), { filename: p.filename, offset: p.offset }]);
  }
  return byName;
}

function bytesAt(file: string, offset: number, length: number): Buffer {
  const fd = openSync(file, 'r');
  try {
    const buf = Buffer.alloc(length);
    readSync(fd, buf, 0, length, offset);
    return buf;
  } finally {
    closeSync(fd);
  }
}

/** JBE rel8 (76) or rel32 (0F 86): a conditional jump, which the kernel emulates. */
const isJbe = (b: Buffer) => b[0] === 0x76 || (b[0] === 0x0f && b[1] === 0x86);

/** The agent's probes of program `name` in a server's binary (the one of `binary` by default). */
const inServer = (probes: ReturnType<typeof agentUprobes>, name: string, file = binary, pid = server.pid) =>
  (probes.get(name) ?? []).filter((p) => p.filename === file || p.filename === `/proc/${pid}/exe`);

/** From a file offset to its address in Go's disassembly, by the executable segment's offset and address (readelf). */
function addressOf(file: string, offset: number): number {
  const load = /LOAD\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+\S+\s+\S+\s+\S+\s+R E/.exec(
    execFileSync('readelf', ['-lW', file]).toString(),
  );
  if (!load) throw new Error(`no executable segment in ${file}`);
  return offset - Number(load[1]) + Number(load[2]);
}

/** A function symbol's address (nm). */
function symbol(file: string, name: string): number {
  const line = execFileSync('nm', [file])
    .toString()
    .split('\n')
    .find((l) => l.endsWith(` ${name}`));
  if (!line) throw new Error(`no ${name} in ${file}`);
  return parseInt(line.split(' ')[0]!, 16);
}

/** runtime.newproc1's instructions, as Go disassembles them: address and text. */
function newproc1(file: string): { address: number; text: string }[] {
  return execFileSync('go', ['tool', 'objdump', '-s', '^runtime.newproc1$', file])
    .toString()
    .split('\n')
    .map((l) => /^\s+\S+\s+0x([0-9a-f]+)\s+[0-9a-f]+\s+(.*?)\s*$/.exec(l))
    .filter((m) => m !== null)
    .map((m) => ({ address: parseInt(m[1]!, 16), text: m[2]! }));
}

/**
 * A copy of `file` whose newproc1 sets up its CALL casgstatus(newg, _Gdead, _Grunnable) with `PUSHQ $6;
 * POPQ BX; NOP` (6A 06 5B 66 90) in place of `MOVL $0x6, BX` (BB 06 00 00 00): the same registers, set in a
 * way the agent does not read as a constant.
 */
function withRunnableByStack(file: string, copy: string): string {
  const code = newproc1(file);
  const at = code.findIndex(
    (insn, i) => insn.text === 'MOVL $0x6, BX' && code[i + 1]?.text === 'MOVL $0x1, CX',
  );
  if (at < 0) throw new Error(`no casgstatus(newg, _Gdead, _Grunnable) set up in ${file}'s newproc1`);
  const bytes = readFileSync(file);
  const offset = code[at]!.address - addressOf(file, 0);
  if (!bytes.subarray(offset, offset + 5).equals(Buffer.from('bb06000000', 'hex')))
    throw new Error(`${file}'s MOVL $0x6, BX is not at offset ${offset}`);
  Buffer.from('6a065b6690', 'hex').copy(bytes, offset);
  writeFileSync(copy, bytes, { mode: 0o755 });
  return copy;
}

it("looks at a receive in the blocking receives (chanrecv1's CALL chanrecv and RET), not in chanrecv, which every select runs", () => {
  const probes = agentUprobes();
  const returns = inServer(probes, 'go_chanrecv1_ret').map((p) => bytesAt(p.filename, p.offset, 1)[0]);
  const starts = inServer(probes, 'go_chanrecv').map((p) => {
    const [call, ...rel] = bytesAt(p.filename, p.offset, 5);
    return { call, to: addressOf(p.filename, p.offset) + 5 + Buffer.from(rel).readInt32LE() };
  });
  // the server's binary has chanrecv1 alone (one CALL, one RET), and chanrecv's own RETs are not probed
  expect({ returns, starts, inChanrecv: inServer(probes, 'go_chanrecv_ret').length }).toEqual({
    returns: [0xc3],
    starts: [{ call: 0xe8, to: symbol(binary, 'runtime.chanrecv') }],
    inChanrecv: 0,
  });
});

it("puts each entry probe of the request path on its function's stack-check jump, which the kernel emulates", () => {
  const probes = agentUprobes();
  const sites = ENTRY_PROBES.map((name) => {
    const at = inServer(probes, name);
    return [name, at.length, at.every((p) => isJbe(bytesAt(p.filename, p.offset, 2)))];
  });
  expect(sites).toEqual(ENTRY_PROBES.map((name) => [name, 1, true]));
});

it("sees each new goroutine (a request's background read) at newproc1's CALL casgstatus(newg, _Gdead, _Grunnable), which the kernel emulates, not at its RET", () => {
  const probes = agentUprobes();
  const code = newproc1(binary);
  const runnable = inServer(probes, 'go_newproc1_runnable').map((p) => {
    const i = code.findIndex((insn) => insn.address === addressOf(p.filename, p.offset));
    return code.slice(i - 3, i + 1).map((insn) => insn.text);
  });
  expect({
    runnable,
    returns: inServer(probes, 'go_newproc1_ret').length,
    entries: inServer(probes, 'go_newproc1').length,
  }).toEqual({
    runnable: [['MOVL $0x6, BX', 'MOVL $0x1, CX', 'NOPL', 'CALL runtime.casgstatus(SB)']],
    returns: 0,
    entries: 0,
  });
});

it('probes the RETs of a newproc1 whose casgstatus call it does not read as making a goroutine runnable, and says so', () => {
  const probes = agentUprobes();
  const returns = inServer(probes, 'go_newproc1_ret', odd, oddServer.pid).map(
    (p) => bytesAt(p.filename, p.offset, 1)[0],
  );
  const line = agent
    .output()
    .split('\n')
    .find((l) => l.includes(`goroutines of ${odd} (`));
  expect({
    returns,
    runnable: inServer(probes, 'go_newproc1_runnable', odd, oddServer.pid).length,
    line,
  }).toEqual({
    returns: [0xc3],
    runnable: 0,
    line: expect.stringMatching(
      /are followed \(.*newproc1's casgstatus\(newg, _Gdead, _Grunnable\) call is not found: its RETs are probed/,
    ),
  });
});
